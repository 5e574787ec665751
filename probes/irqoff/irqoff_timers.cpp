// The timer methods' per-CPU timers: a cpu-clock perf event on every online CPU (and a cycles
// NMI event for the nmi method), attached at start and followed as CPUs come and go.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/irqoff/irqoff_probe.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

// NMI samples per threshold: a region of threshold length is seen at least twice.
constexpr double kNmiSamplesPerThreshold = 4;

int PerfEventOpen(perf_event_attr& attr, int cpu) {
  return static_cast<int>(
      syscall(SYS_perf_event_open, &attr, /*pid=*/-1, cpu, /*group_fd=*/-1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

absl::Status IrqOffProbe::AttachTimers() {
  absl::StatusOr<std::vector<int>> online = kernel_.OnlineCpus();
  if (!online.ok()) return online.status();
  std::vector<std::string> errors;
  for (int cpu : *online) {
    if (absl::Status s = AttachCpu(cpu); !s.ok()) {
      errors.push_back(fmt::format("CPU {}: {}", cpu, std::string(s.message())));
    }
  }
  if (cpus_.empty()) {
    return absl::UnavailableError(errors.empty() ? std::string("no online CPU")
                                                 : fmt::format("{}", fmt::join(errors, "; ")));
  }
  if (!errors.empty()) {
    spdlog::warn("probe irqoff: timers not attached on {}", fmt::join(errors, "; "));
  }
  return absl::OkStatus();
}

absl::Status IrqOffProbe::AttachCpu(int cpu) {
  if (cpus_.count(cpu)) return absl::OkStatus();
  // A new generation first: the first tick on this CPU then starts a fresh baseline.
  uint32_t generation = ++generations_[cpu];
  __u32 key = static_cast<__u32>(cpu);
  if (bpf_map_update_elem(generation_fd_, &key, &generation, BPF_ANY) != 0) {
    return LibbpfError("set CPU generation", errno);
  }
  CpuTimers timers;
  perf_event_attr tick{};
  tick.size = sizeof(tick);
  tick.type = PERF_TYPE_SOFTWARE;
  tick.config = PERF_COUNT_SW_CPU_CLOCK;
  tick.sample_period = static_cast<__u64>(absl::ToInt64Nanoseconds(options_.detector.period));
  timers.tick.fd = PerfEventOpen(tick, cpu);
  if (timers.tick.fd < 0) return LibbpfError("perf_event_open cpu-clock", errno);
  bpf_link* link = bpf_program__attach_perf_event(progs_.tick, timers.tick.fd);
  if (!link) {
    int err = errno;
    close(timers.tick.fd);
    return LibbpfError("attach cpu-clock", err);
  }
  timers.tick.link.reset(link);

  if (method_ == IrqOffMethod::kNmi) {
    perf_event_attr nmi{};
    nmi.size = sizeof(nmi);
    nmi.type = PERF_TYPE_HARDWARE;
    nmi.config = PERF_COUNT_HW_CPU_CYCLES;
    nmi.freq = 1;
    nmi.sample_freq = static_cast<__u64>(
        std::ceil(kNmiSamplesPerThreshold / absl::ToDoubleSeconds(options_.detector.threshold)));
    timers.nmi.fd = PerfEventOpen(nmi, cpu);
    bpf_link* nmi_link =
        timers.nmi.fd >= 0 ? bpf_program__attach_perf_event(progs_.nmi, timers.nmi.fd) : nullptr;
    if (!nmi_link) {
      int err = errno;
      if (timers.nmi.fd >= 0) close(timers.nmi.fd);
      timers.tick.link.reset();  // closes the tick's perf event too
      return LibbpfError("cycles NMI event", err);
    }
    timers.nmi.link.reset(nmi_link);
  }
  cpus_.emplace(cpu, std::move(timers));
  return absl::OkStatus();
}

void IrqOffProbe::DetachCpu(int cpu) {
  auto it = cpus_.find(cpu);
  if (it == cpus_.end()) return;
  for (PerfAttachment* a : {&it->second.tick, &it->second.nmi}) {
    // libbpf's perf-event link owns the event's fd: destroying the link closes it.
    if (a->link) {
      a->link.reset();
    } else if (a->fd >= 0) {
      close(a->fd);
    }
    a->fd = -1;
  }
  cpus_.erase(it);
}

void IrqOffProbe::RefreshCpus() {
  if (method_ != IrqOffMethod::kNmi && method_ != IrqOffMethod::kSoftwareTimer) return;
  absl::StatusOr<std::vector<int>> online = kernel_.OnlineCpus();
  if (!online.ok()) return;  // keep what is attached
  std::vector<int> gone;
  for (const auto& [cpu, timers] : cpus_) {
    if (!std::binary_search(online->begin(), online->end(), cpu)) gone.push_back(cpu);
  }
  for (int cpu : gone) {
    DetachCpu(cpu);
    spdlog::info("probe irqoff: CPU {} went offline, its timer is closed", cpu);
  }
  for (int cpu : *online) {
    if (cpus_.count(cpu)) continue;
    absl::Status s = AttachCpu(cpu);
    std::string error = s.ok() ? "" : std::string(s.message());
    if (s.ok()) {
      spdlog::info("probe irqoff: CPU {} is online, its timer is attached", cpu);
    } else if (cpu_errors_[cpu] != error) {
      spdlog::warn("probe irqoff: CPU {} is online but its timer did not attach: {}", cpu, error);
    }
    cpu_errors_[cpu] = error;
  }
}

}  // namespace kpath
