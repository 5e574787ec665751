#include "daemon/least_privilege.h"

#include <bpf/bpf.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

using Check = CapabilityNeed::Check;

// The kernel decides whether /proc/kallsyms shows addresses by the opener's credentials.
bool KallsymsShowsAddresses(const std::string& path) {
  std::ifstream in(path);
  std::string address;
  if (!(in >> address)) return false;
  return std::strtoull(address.c_str(), nullptr, 16) != 0;
}

// What every sample does with the probes' maps: a lookup through a descriptor kpathd holds.
bool ReadsBpfMap(int map_fd) {
  uint32_t key = 0;
  uint32_t value = 0;
  return map_fd >= 0 && bpf_map_lookup_elem(map_fd, &key, &value) == 0;
}

// What a retried probe's attach and a new CPU's IRQ-off timer do: open a CPU-wide perf event.
bool OpensPerfEvent() {
  perf_event_attr attr{};
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof(attr);
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.disabled = 1;
  const int cpu = sched_getcpu();
  const long fd =
      syscall(SYS_perf_event_open, &attr, -1, cpu < 0 ? 0 : cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return false;
  close(static_cast<int>(fd));
  return true;
}

}  // namespace

std::vector<CapabilityNeed> SteadyStateNeeds(const SteadyStateWork& work, int last_capability) {
  const int bpf = last_capability >= CAP_BPF ? CAP_BPF : CAP_SYS_ADMIN;
  const int perfmon = last_capability >= CAP_PERFMON ? CAP_PERFMON : CAP_SYS_ADMIN;
  std::vector<CapabilityNeed> needs;
  if (work.bpf_maps) {
    needs.push_back({bpf,
                     "read the probes' BPF maps (bpf() on descriptors it holds needs it where "
                     "kernel.unprivileged_bpf_disabled is set, Linux 5.8 to 5.18)",
                     Check::kBpfMapRead});
  }
  if (work.reattaches_probes) {
    const std::string why =
        "load and attach again a probe that did not attach at start or stopped working (the "
        "collector set retries it)";
    needs.push_back({bpf, why});
    needs.push_back({perfmon, why});
  }
  if (work.names_kernel_addresses) {
    needs.push_back({CAP_SYSLOG,
                     "re-read /proc/kallsyms with its addresses when modules or BPF programs "
                     "change, to name percpu callers and IRQ-off culprits (not needed where "
                     "kernel.kptr_restrict and kernel.perf_event_paranoid show them to anyone)",
                     Check::kKallsymsAddresses});
  }
  if (work.perf_event_timers) {
    needs.push_back({perfmon,
                     "open the IRQ-off timer (a per-CPU perf event) of a CPU that comes "
                     "online"});
  }
  if (work.reattaches_probes || work.perf_event_timers) {
    // Debian's and Ubuntu's kernels carry a patch that refuses perf_event_open to all but
    // CAP_SYS_ADMIN (CAP_PERFMON is not enough) where kernel.perf_event_paranoid is above 2,
    // their default (Debian 12's 6.1 under tests/qemu: EACCES on a retried tracepoint attach).
    needs.push_back({CAP_SYS_ADMIN,
                     "open perf events (the attach of a retried probe, a new CPU's IRQ-off "
                     "timer) where kernel.perf_event_paranoid is above 2 (Debian's and Ubuntu's "
                     "kernels then ask for CAP_SYS_ADMIN, not CAP_PERFMON)",
                     Check::kPerfEventOpen});
  }
  if (work.foreign_bpf_inventory) {
    needs.push_back({CAP_SYS_ADMIN,
                     "list other programs' BPF programs and links (BPF_*_GET_NEXT_ID, "
                     "BPF_*_GET_FD_BY_ID), ask what a perf event runs (BPF_TASK_FD_QUERY) and "
                     "turn BPF run-time statistics on (BPF_ENABLE_STATS) for the foreign hook "
                     "inventory"});
    needs.push_back({CAP_SYS_PTRACE,
                     "read other processes' descriptors (/proc/PID/fd links, fdinfo) to name the "
                     "owners of foreign BPF programs and perf events"});
    needs.push_back({CAP_DAC_READ_SEARCH,
                     "open other users' /proc/PID/fd directories (mode 0500) for that owner scan"});
  }
  if (work.mounted_tracing_fs) {
    needs.push_back(
        {CAP_SYS_ADMIN, "unmount at exit the tracefs or debugfs that kpathd mounted at start"});
  }
  return needs;
}

CapabilitySet ResolveNeeds(const std::vector<CapabilityNeed>& needs, const WorksWith& works_with) {
  CapabilitySet required;
  CapabilitySet result;
  for (const CapabilityNeed& need : needs) {
    result = result.With(need.capability);
    if (need.check == Check::kNone) required = required.With(need.capability);
  }
  // A capability goes only if every need of it works without it.
  for (int capability : (result - required).List()) {
    const CapabilitySet candidate = result.Without(capability);
    bool works = true;
    for (const CapabilityNeed& need : needs) {
      if (need.capability == capability) works = works && works_with(need, candidate);
    }
    if (works) result = candidate;
  }
  return result;
}

void DropToSteadyState(const SteadyStateWork& work) {
  const ThreadCapabilities start = CurrentThreadCapabilities();
  spdlog::info("capabilities at start: {}", start.permitted.ToString());
  if (start.permitted.empty()) return;

  const std::vector<CapabilityNeed> needs = SteadyStateNeeds(work, LastCapability());
  // Created while every capability is still there; what it needs to be read is the question.
  const int map_fd = work.bpf_maps ? bpf_map_create(BPF_MAP_TYPE_ARRAY, "kpath_cap_check",
                                                    sizeof(uint32_t), sizeof(uint32_t), 1, nullptr)
                                   : -1;
  CapabilitySet keep =
      ResolveNeeds(needs, [&](const CapabilityNeed& need, CapabilitySet candidate) {
        if (!SetThisThreadEffective(candidate).ok()) return false;
        bool works = false;
        switch (need.check) {
          case Check::kBpfMapRead:
            works = ReadsBpfMap(map_fd);
            break;
          case Check::kKallsymsAddresses:
            works = KallsymsShowsAddresses(work.kallsyms_path);
            break;
          case Check::kPerfEventOpen:
            works = OpensPerfEvent();
            break;
          case Check::kNone:
            break;
        }
        (void)SetThisThreadEffective(start.effective);
        if (works) {
          spdlog::info("capabilities: {} is not needed on this kernel to {}",
                       CapabilityName(need.capability), need.why);
        }
        return works;
      });
  if (map_fd >= 0) close(map_fd);
  keep = keep & start.permitted;

  if (absl::Status s = LimitEveryThread(keep); !s.ok()) {
    spdlog::warn("capabilities: could not drop everything not needed: {}",
                 std::string(s.message()));
  }
  std::map<int, std::string> reasons;
  for (const CapabilityNeed& need : needs) {
    if (!keep.Has(need.capability)) continue;
    std::string& why = reasons[need.capability];
    absl::StrAppend(&why, why.empty() ? "" : "; ", need.why);
  }
  spdlog::info("capabilities after start: {} (dropped {})", keep.ToString(),
               (start.permitted - keep).ToString());
  for (const auto& [capability, why] : reasons) {
    spdlog::info("capabilities: keeping {} to {}", CapabilityName(capability), why);
  }
}

}  // namespace kpath
