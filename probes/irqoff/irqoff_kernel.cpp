#include "probes/irqoff/irqoff_kernel.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <array>
#include <filesystem>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "probes/irqoff/kernel_stack_symbolizer.h"
#include "probes/kernel/kernel_features.h"

namespace kpath {

absl::Status LiveIrqOffKernel::HardwareNmiSampling() {
  const std::filesystem::path sources = paths_.Sys("bus/event_source/devices");
#if defined(__x86_64__)
  // The core PMU is `cpu` (`cpu_core`/`cpu_atom` on hybrid parts); its overflow is always an NMI.
  for (std::string_view pmu : {"cpu", "cpu_core", "cpu_atom"}) {
    if (PathExists(sources / pmu / "type")) return absl::OkStatus();
  }
  return absl::UnavailableError(fmt::format(
      "no hardware PMU ({}/cpu absent: a VM without a virtual PMU?)", sources.string()));
#elif defined(__aarch64__)
  bool pmu = false;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sources, ec)) {
    if (entry.path().filename().string().starts_with("armv8")) pmu = true;
  }
  if (!pmu) return absl::UnavailableError(fmt::format("no armv8 PMU in {}", sources.string()));
  // Without pseudo-NMIs the arm64 PMU interrupt is an ordinary IRQ, masked like the timer.
  absl::StatusOr<std::string> cmdline = ReadFileToString(paths_.Proc("cmdline"), 1 << 16);
  if (cmdline.ok() && cmdline->find("irqchip.gicv3_pseudo_nmi=1") != std::string::npos) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      "the PMU interrupt is not an NMI (boot without irqchip.gicv3_pseudo_nmi=1)");
#else
  return absl::UnimplementedError("NMI sampling is not known on this architecture");
#endif
}

absl::Status LiveIrqOffKernel::SoftwareCpuClock() {
  std::filesystem::path type = paths_.Sys("bus/event_source/devices/software/type");
  if (PathExists(type)) return absl::OkStatus();
  return absl::UnavailableError(fmt::format("no software perf event source ({})", type.string()));
}

bool LiveIrqOffKernel::HasRingBuffer() {
  return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr) == 1;
}

bool LiveIrqOffKernel::KvmStealTimeReadable() {
  std::filesystem::path btf_path = paths_.Sys("kernel/btf/vmlinux");
  if (!PathExists(btf_path)) return false;
  struct btf* btf = btf__parse(btf_path.c_str(), nullptr);
  if (btf == nullptr) return false;
  bool var = btf__find_by_name_kind(btf, "steal_time", BTF_KIND_VAR) > 0;
  btf__free(btf);
  if (!var) return false;
  absl::StatusOr<std::string> text = ReadFileToString(paths_.Proc("kallsyms"));
  if (!text.ok()) return false;
  constexpr std::array<std::string_view, 1> kWanted = {"steal_time"};
  absl::StatusOr<KallsymsOutsideVmlinux> parsed = ParseKallsymsOutsideVmlinux(*text, kWanted);
  return parsed.ok() && !parsed->listed_names.empty();
}

absl::StatusOr<std::vector<int>> LiveIrqOffKernel::OnlineCpus() {
  absl::StatusOr<std::string> text =
      ReadFileToString(paths_.Sys("devices/system/cpu/online"), 1 << 16);
  if (!text.ok()) return text.status();
  return ParseCpuList(*text);
}

}  // namespace kpath
