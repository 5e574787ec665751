// What kpathd keeps of its capabilities once its probes are attached, and why; the rest are
// dropped from every thread. Loading and attaching BPF programs, opening perf events, mounting
// tracefs and raising RLIMIT_MEMLOCK happen at start only; docs/reliability.md ("Least
// privilege") lists each capability, when it is used and whether it stays.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "daemon/capability_set.h"

namespace kpath {

// What the running daemon goes on doing after start, as far as privileges go.
struct SteadyStateWork {
  bool bpf_maps = false;  // reads the maps of its BPF probes on every sample
  // Loads and attaches BPF probes again after start: the collector set retries a probe that did
  // not attach at start and restarts one whose collections keep failing.
  bool reattaches_probes = false;
  // Names kernel addresses (percpu_alloc callers, irqoff culprits) and re-reads /proc/kallsyms
  // when modules or BPF programs come and go; the file to read.
  bool names_kernel_addresses = false;
  std::string kallsyms_path = "/proc/kallsyms";
  bool perf_event_timers = false;      // irqoff's per-CPU timers: a CPU that comes online gets one
  bool foreign_bpf_inventory = false;  // hooks with BPF: other processes' BPF objects and owners
  bool mounted_tracing_fs = false;     // kpathd mounted tracefs or debugfs, to unmount at exit
};

struct CapabilityNeed {
  // Needed on some kernels or settings only: the kernel is asked, with the capability out of
  // the effective set, whether the work goes on without it.
  enum class Check {
    kNone,               // always needed
    kBpfMapRead,         // a lookup in a BPF map through a descriptor kpathd holds
    kKallsymsAddresses,  // /proc/kallsyms opened now shows real addresses
    kPerfEventOpen,      // a CPU-wide perf event (kernel and user) opens now
  };
  int capability = 0;
  std::string why;
  Check check = Check::kNone;
  bool operator==(const CapabilityNeed&) const = default;
};

// The needs for `work` (pure). `last_capability`: the kernel's cap_last_cap; before Linux 5.8
// (no CAP_BPF, CAP_PERFMON) CAP_SYS_ADMIN stands in for both.
std::vector<CapabilityNeed> SteadyStateNeeds(const SteadyStateWork& work, int last_capability);

// The set the needs call for, less what the kernel says is not needed: for each need with a
// check, `works_with(need, candidate)` runs the need's work with only `candidate` (the set
// so far without the need's capability) effective and says whether it succeeded.
using WorksWith = std::function<bool(const CapabilityNeed& need, CapabilitySet candidate)>;
CapabilitySet ResolveNeeds(const std::vector<CapabilityNeed>& needs, const WorksWith& works_with);

// Limits every thread to what `work` needs and logs, at info, the set at start, what stays and
// why, and what was dropped. Failures are logged; kpathd goes on with what it has.
void DropToSteadyState(const SteadyStateWork& work);

}  // namespace kpath
