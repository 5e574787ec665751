// How a probe hooks the kernel. Every probe declares an ordered list of these; the first one the
// running kernel supports is used and reported as kpath_probe_attached{mechanism=...}.
#pragma once

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpath {

enum class Mechanism {
  kTpBtf,       // BTF-typed raw tracepoint (5.5+, needs vmlinux BTF)
  kRawTp,       // raw tracepoint (4.17+)
  kTracepoint,  // classic tracepoint through tracefs/perf (4.7+)
  kFentry,      // BPF trampoline on a kernel function (5.5+, needs BTF and arch support)
  kKprobe,      // kprobe on a kernel function (needs CONFIG_KPROBES)
  kPerfEvent,   // perf event sampling (software or hardware)
  kProcfs,      // no BPF: /proc or /sys sampling only
  kNone,        // nothing attached
};

std::string_view MechanismName(Mechanism m);
std::optional<Mechanism> ParseMechanism(std::string_view name);
// The names accepted in the configuration, in the order above (without "none").
std::vector<std::string_view> MechanismNames();

// One way to attach a probe: a mechanism and its target (a tracepoint "category:event" or a
// kernel function name).
struct AttachPlan {
  Mechanism mechanism;
  std::string target;
  // Costs the host beyond the probe's own events (slabinfo_readers' syscall tracepoints tax
  // every system call), so the default configuration leaves it out. A probe that attaches
  // nothing because only such plans, supported here, were left out is off by configuration.
  bool costly = false;
};

// A probe's plans from the mechanisms it declares once (kMechanisms, best first, and
// kDefaultMechanisms): for each mechanism in order, one plan per target that `targets(mechanism)`
// returns (a std::vector<std::string>, best first). A mechanism the defaults leave out is costly.
template <typename Mechanisms, typename Defaults, typename Targets>
std::vector<AttachPlan> PlansFor(const Mechanisms& mechanisms, const Defaults& defaults,
                                 Targets targets) {
  std::vector<AttachPlan> plans;
  for (Mechanism m : mechanisms) {
    const bool costly =
        std::find(std::begin(defaults), std::end(defaults), m) == std::end(defaults);
    for (std::string& target : targets(m)) plans.push_back({m, std::move(target), costly});
  }
  return plans;
}

}  // namespace kpath
