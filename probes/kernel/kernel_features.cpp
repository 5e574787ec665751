#include "probes/kernel/kernel_features.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "fmt/format.h"
#include "probes/kernel/kernel_symbolizer.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

// The bit offset of `member` in the struct or union `t`, looking into anonymous struct and union
// members too (x86's pcpu_hot keeps preempt_count in an anonymous struct inside a union).
std::optional<uint32_t> BtfMemberBitOffset(const struct btf* btf, const struct btf_type* t,
                                           std::string_view member, int depth) {
  if (t == nullptr || depth > 4 || !(btf_is_struct(t) || btf_is_union(t))) return std::nullopt;
  const struct btf_member* m = btf_members(t);
  for (int i = 0; i < btf_vlen(t); ++i) {
    const char* name = btf__name_by_offset(btf, m[i].name_off);
    uint32_t bits = btf_member_bit_offset(t, static_cast<uint32_t>(i));
    if (name != nullptr && member == name) return bits;
    if (name == nullptr || *name == '\0') {
      int inner = btf__resolve_type(btf, m[i].type);
      if (inner <= 0) continue;
      if (std::optional<uint32_t> in = BtfMemberBitOffset(
              btf, btf__type_by_id(btf, static_cast<uint32_t>(inner)), member, depth + 1)) {
        return bits + *in;
      }
    }
  }
  return std::nullopt;
}

// Debian's abseil has its own absl::string_view, distinct from std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

KernelFeatures::KernelFeatures() : layout_(std::make_unique<KernelLayout>(*this)) {}
KernelFeatures::KernelFeatures(const KernelFeatures&) : KernelFeatures() {}
KernelFeatures& KernelFeatures::operator=(const KernelFeatures& other) {
  if (this != &other) layout_ = std::make_unique<KernelLayout>(*this);
  return *this;
}
KernelFeatures::~KernelFeatures() = default;

LiveKernelFeatures::LiveKernelFeatures(HostPaths paths, bool may_mount)
    : paths_(std::move(paths)), may_mount_(may_mount) {}

void LiveKernelFeatures::ReleaseBtf() {
  std::lock_guard<std::mutex> lock(mu_);
  if (btf_ != nullptr) btf__free(btf_);
  btf_ = nullptr;
  btf_tried_ = false;
}

LiveKernelFeatures::~LiveKernelFeatures() {
  if (btf_ != nullptr) btf__free(btf_);
  if (!mounted_tracefs_.empty()) UnmountTracefs(mounted_tracefs_);
}

struct btf* LiveKernelFeatures::VmlinuxBtf() {
  if (btf_tried_) return btf_;
  btf_tried_ = true;
  std::filesystem::path path = paths_.Sys("kernel/btf/vmlinux");
  if (!PathExists(path)) {
    spdlog::info("no vmlinux BTF at {}: BTF-based probes (tp_btf, fentry, CO-RE) are off",
                 path.string());
    return nullptr;
  }
  errno = 0;
  struct btf* btf = btf__parse(path.c_str(), nullptr);
  if (btf == nullptr) {
    int err = errno;
    spdlog::warn("btf__parse({}): {}; BTF-based probes are off", path.string(),
                 std::strerror(err != 0 ? err : EINVAL));
    return nullptr;
  }
  btf_ = btf;
  return btf_;
}

bool LiveKernelFeatures::HasVmlinuxBtf() {
  std::lock_guard<std::mutex> lock(mu_);
  return VmlinuxBtf() != nullptr;
}

std::optional<int> LiveKernelFeatures::BtfTracepointArgs(std::string_view event) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || event.empty()) return std::nullopt;
  std::string name = absl::StrCat("btf_trace_", Av(event));
  int id = btf__find_by_name_kind(btf, name.c_str(), BTF_KIND_TYPEDEF);
  if (id <= 0) return std::nullopt;
  // typedef btf_trace_<event> -> pointer -> function prototype (void *__data, args...)
  const struct btf_type* t = btf__type_by_id(btf, btf__type_by_id(btf, id)->type);
  if (t == nullptr || !btf_is_ptr(t)) return std::nullopt;
  t = btf__type_by_id(btf, t->type);
  if (t == nullptr || !btf_is_func_proto(t) || btf_vlen(t) < 1) return std::nullopt;
  return static_cast<int>(btf_vlen(t)) - 1;
}

bool LiveKernelFeatures::BtfHasFunction(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || name.empty()) return false;
  return btf__find_by_name_kind(btf, std::string(name).c_str(), BTF_KIND_FUNC) > 0;
}

std::optional<std::vector<std::string>> LiveKernelFeatures::BtfFunctionParams(
    std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || name.empty()) return std::nullopt;
  int id = btf__find_by_name_kind(btf, std::string(name).c_str(), BTF_KIND_FUNC);
  if (id <= 0) return std::nullopt;
  // FUNC -> FUNC_PROTO, whose params carry the names.
  const struct btf_type* proto = btf__type_by_id(btf, btf__type_by_id(btf, id)->type);
  if (proto == nullptr || !btf_is_func_proto(proto)) return std::nullopt;
  std::vector<std::string> params;
  const struct btf_param* param = btf_params(proto);
  for (int i = 0; i < btf_vlen(proto); ++i) {
    const char* param_name = btf__name_by_offset(btf, param[i].name_off);
    params.emplace_back(param_name != nullptr ? param_name : "");
  }
  return params;
}

std::optional<uint32_t> LiveKernelFeatures::BtfMemberOffset(std::string_view struct_name,
                                                            std::string_view member) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || struct_name.empty() || member.empty()) return std::nullopt;
  int id = btf__find_by_name_kind(btf, std::string(struct_name).c_str(), BTF_KIND_STRUCT);
  if (id <= 0) return std::nullopt;
  std::optional<uint32_t> bits = BtfMemberBitOffset(btf, btf__type_by_id(btf, id), member, 0);
  if (!bits || *bits % 8 != 0) return std::nullopt;  // a bitfield: no byte offset
  return *bits / 8;
}

std::optional<uint32_t> LiveKernelFeatures::BtfPercpuVarOffset(std::string_view var) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || var.empty()) return std::nullopt;
  int id = btf__find_by_name_kind(btf, ".data..percpu", BTF_KIND_DATASEC);
  if (id <= 0) return std::nullopt;
  const struct btf_type* section = btf__type_by_id(btf, id);
  const struct btf_var_secinfo* v = btf_var_secinfos(section);
  for (int i = 0; i < btf_vlen(section); ++i, ++v) {
    const struct btf_type* t = btf__type_by_id(btf, v->type);
    const char* name = t != nullptr ? btf__name_by_offset(btf, t->name_off) : nullptr;
    if (name != nullptr && var == name) return v->offset;
  }
  return std::nullopt;
}

absl::StatusOr<std::filesystem::path> LiveKernelFeatures::TracefsLocked() {
  if (!tracefs_) tracefs_ = FindOrMountTracefs(paths_, may_mount_, &mounted_tracefs_);
  return *tracefs_;
}

absl::StatusOr<std::filesystem::path> LiveKernelFeatures::Tracefs() {
  std::lock_guard<std::mutex> lock(mu_);
  return TracefsLocked();
}

absl::StatusOr<TracepointFormat> LiveKernelFeatures::Tracepoint(std::string_view category,
                                                                std::string_view event) {
  if (!IsSafeTracepointName(category) || !IsSafeTracepointName(event)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad tracepoint name \"", Av(category), ":", Av(event), "\""));
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = absl::StrCat(Av(category), "/", Av(event));
  if (auto it = formats_.find(key); it != formats_.end()) return it->second;
  absl::StatusOr<std::filesystem::path> tracefs = TracefsLocked();
  if (!tracefs.ok()) return tracefs.status();  // not cached: not an answer about the event
  absl::StatusOr<TracepointFormat> result = ReadTracepointFormat(*tracefs, category, event);
  // A missing event is asked again next time: a module loaded later may bring it (probe retry).
  if (!absl::IsNotFound(result.status())) formats_.emplace(std::move(key), result);
  return result;
}

bool LiveKernelFeatures::TracepointExists(std::string_view category, std::string_view event) {
  if (!IsSafeTracepointName(category) || !IsSafeTracepointName(event)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (struct btf* btf = VmlinuxBtf(); btf != nullptr) {
    std::string name = absl::StrCat("btf_trace_", Av(event));
    if (btf__find_by_name_kind(btf, name.c_str(), BTF_KIND_TYPEDEF) > 0) return true;
  }
  if (auto kallsyms = KallsymsLocked(); kallsyms && kallsyms->HasTracepoint(event)) return true;
  absl::StatusOr<std::filesystem::path> tracefs = TracefsLocked();
  return tracefs.ok() && IsDirectory(*tracefs / "events" / category / event);
}

std::optional<std::string> LiveKernelFeatures::KernelFunction(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto kallsyms = KallsymsLocked();
  if (!kallsyms) return std::nullopt;
  return kallsyms->ResolveFunction(name);
}

absl::Status LiveKernelFeatures::KprobesAvailable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (kprobes_) return *kprobes_;
  std::filesystem::path pmu = paths_.Sys("bus/event_source/devices/kprobe");
  if (PathExists(pmu / "type")) {
    kprobes_ = absl::OkStatus();
    return *kprobes_;
  }
  std::string tracefs_part;
  absl::StatusOr<std::filesystem::path> tracefs = TracefsLocked();
  if (tracefs.ok()) {
    if (PathExists(*tracefs / "kprobe_events")) {
      kprobes_ = absl::OkStatus();
      return *kprobes_;
    }
    tracefs_part = absl::StrCat("no kprobe_events in tracefs (", tracefs->string(), ")");
  } else {
    tracefs_part =
        absl::StrCat("no tracefs to look for kprobe_events (", tracefs.status().message(), ")");
  }
  kprobes_ = absl::FailedPreconditionError(absl::StrCat("no kprobe perf event source (",
                                                        pmu.string(), ") and ", tracefs_part,
                                                        ": kernel built without CONFIG_KPROBES?"));
  return *kprobes_;
}

int LiveKernelFeatures::PossibleCpus() {
  std::lock_guard<std::mutex> lock(mu_);
  if (possible_cpus_) return *possible_cpus_;
  std::filesystem::path path = paths_.Sys("devices/system/cpu/possible");
  absl::StatusOr<std::vector<int>> cpus = ReadCpuList(path);
  if (cpus.ok() && !cpus->empty()) {
    // A count, as libbpf and the kernel's per-CPU map copies (for_each_possible_cpu) use.
    possible_cpus_ = static_cast<int>(cpus->size());
  } else {
    int n = libbpf_num_possible_cpus();
    spdlog::warn("{}: {}; using libbpf's count {}", path.string(),
                 cpus.ok() ? "empty CPU list" : std::string(cpus.status().message()), n);
    possible_cpus_ = n > 0 ? n : 1;
  }
  return *possible_cpus_;
}

std::shared_ptr<const KallsymsIndex> LiveKernelFeatures::KallsymsLocked() {
  if (kallsyms_tried_) return kallsyms_;
  kallsyms_tried_ = true;
  std::filesystem::path path = paths_.Proc("kallsyms");
  // One copy for the process: the percpu probe's symbolizer shares it (SharedKallsymsIndex).
  absl::StatusOr<std::string> modules = ReadFileToString(paths_.Proc("modules"));
  absl::StatusOr<std::shared_ptr<const KallsymsIndex>> index =
      SharedKallsymsIndex(paths_, modules.ok() ? *modules : std::string());
  if (!index.ok()) {
    spdlog::warn("kallsyms unavailable: {}", std::string(index.status().message()));
    return nullptr;
  }
  if ((*index)->AddressesHidden()) {
    spdlog::info("{}: addresses hidden (kptr_restrict); names only, no symbolization",
                 path.string());
  }
  kallsyms_ = *std::move(index);
  return kallsyms_;
}

std::shared_ptr<const KallsymsIndex> LiveKernelFeatures::Kallsyms() {
  std::lock_guard<std::mutex> lock(mu_);
  return KallsymsLocked();
}

absl::Status LiveKernelFeatures::HardwareNmiSampling() {
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

absl::Status LiveKernelFeatures::SoftwareCpuClock() {
  std::filesystem::path type = paths_.Sys("bus/event_source/devices/software/type");
  if (PathExists(type)) return absl::OkStatus();
  return absl::UnavailableError(fmt::format("no software perf event source ({})", type.string()));
}

bool LiveKernelFeatures::HasRingBuffer() {
  return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr) == 1;
}

bool LiveKernelFeatures::HasBpfGlobalData() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!global_data_) {
    // What libbpf asks (probe_kern_global_data): does a socket filter that stores through a
    // pointer to an array map's value (ld_imm64 BPF_PSEUDO_MAP_VALUE) load?
    global_data_ = false;
    int map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "kpath_global", sizeof(int), 32, 1, nullptr);
    if (map >= 0) {
      bpf_insn insns[5] = {};
      insns[0].code = BPF_LD | BPF_DW | BPF_IMM;  // r1 = &map value + 16
      insns[0].dst_reg = BPF_REG_1;
      insns[0].src_reg = BPF_PSEUDO_MAP_VALUE;
      insns[0].imm = map;
      insns[1].imm = 16;
      insns[2].code = BPF_ST | BPF_MEM | BPF_DW;  // *(u64*)(r1 + 0) = 42
      insns[2].dst_reg = BPF_REG_1;
      insns[2].imm = 42;
      insns[3].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
      insns[3].dst_reg = BPF_REG_0;
      insns[4].code = BPF_JMP | BPF_EXIT;
      int prog = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, nullptr, "GPL", insns, 5, nullptr);
      global_data_ = prog >= 0;
      if (prog >= 0) close(prog);
      close(map);
    }
  }
  return *global_data_;
}

bool LiveKernelFeatures::HasBpfAtomics() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!atomics_) {
    // A socket filter that fetch-and-adds to a stack slot: refused before 5.12.
    bpf_insn insns[5] = {};
    insns[0].code = BPF_ST | BPF_MEM | BPF_DW;  // *(u64*)(r10 - 8) = 0
    insns[0].dst_reg = BPF_REG_10;
    insns[0].off = -8;
    insns[1].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r1 = 1
    insns[1].dst_reg = BPF_REG_1;
    insns[1].imm = 1;
    insns[2].code = BPF_STX | BPF_ATOMIC | BPF_DW;  // r1 = atomic_fetch_add(r10 - 8, r1)
    insns[2].dst_reg = BPF_REG_10;
    insns[2].src_reg = BPF_REG_1;
    insns[2].off = -8;
    insns[2].imm = BPF_ADD | BPF_FETCH;
    insns[3].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
    insns[3].dst_reg = BPF_REG_0;
    insns[4].code = BPF_JMP | BPF_EXIT;
    int prog = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, nullptr, "GPL", insns,
                             sizeof(insns) / sizeof(insns[0]), nullptr);
    atomics_ = prog >= 0;
    if (prog >= 0) close(prog);
  }
  return *atomics_;
}

bool LiveKernelFeatures::KvmStealTimeReadable() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    struct btf* btf = VmlinuxBtf();
    if (btf == nullptr || btf__find_by_name_kind(btf, "steal_time", BTF_KIND_VAR) <= 0) {
      return false;
    }
  }
  absl::StatusOr<std::string> text = ReadFileToString(paths_.Proc("kallsyms"));
  if (!text.ok()) return false;
  constexpr std::array<std::string_view, 1> kWanted = {"steal_time"};
  absl::StatusOr<KallsymsOutsideVmlinux> parsed = ParseKallsymsOutsideVmlinux(*text, kWanted);
  return parsed.ok() && !parsed->listed_names.empty();
}

absl::StatusOr<std::vector<int>> LiveKernelFeatures::OnlineCpus() {
  return ReadCpuList(paths_.Sys("devices/system/cpu/online"));
}

}  // namespace kpath
