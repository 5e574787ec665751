// How a probe hooks the kernel. Every probe declares an ordered list of these; the first one the
// running kernel supports is used and reported as kpath_probe_attached{mechanism=...}.
#pragma once

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

}  // namespace kpath
