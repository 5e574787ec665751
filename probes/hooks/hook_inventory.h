// The foreign-hook inventory as a pure function of what the kernel shows: kprobes/list, tracefs
// dynamic events, enabled_functions, BPF programs and links, and who holds them. Everything of
// kpathd's own (held by its process, or named by libbpf after its pid) is left out. The same
// hook seen by several sources is counted once (see BuildHookInventory).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "probes/hooks/bpf_holders.h"
#include "probes/hooks/bpf_objects.h"
#include "probes/hooks/enabled_functions.h"
#include "probes/hooks/kprobe_list.h"
#include "probes/hooks/probe_events.h"

namespace kpath {

// The `kind` label values: the metrics contract's, plus uretprobe.
namespace hook_kind {
inline constexpr std::string_view kKprobe = "kprobe";
inline constexpr std::string_view kKretprobe = "kretprobe";
inline constexpr std::string_view kUprobe = "uprobe";
inline constexpr std::string_view kUretprobe = "uretprobe";
inline constexpr std::string_view kTracepoint = "tracepoint";
inline constexpr std::string_view kRawTracepoint = "raw_tracepoint";
inline constexpr std::string_view kFentry = "fentry";
inline constexpr std::string_view kFexit = "fexit";
inline constexpr std::string_view kPerfEvent = "perf_event";
inline constexpr std::string_view kLsm = "lsm";
inline constexpr std::string_view kFtrace = "ftrace";
inline constexpr std::string_view kOther = "other";
}  // namespace hook_kind
std::span<const std::string_view> HookKinds();

// The configured hot-function list, matched against hook targets: function names without their
// clone suffix or offset; LSM hooks by security_<hook>; "category:event" tracepoints also by their
// bare event name (raw tracepoints carry no category).
class HotTargets {
 public:
  explicit HotTargets(const std::vector<std::string>& entries);
  bool IsHot(std::string_view kind, std::string_view target) const;

 private:
  std::set<std::string, std::less<>> functions_;
  std::set<std::string, std::less<>> tracepoints_;        // "sched:sched_switch"
  std::set<std::string, std::less<>> tracepoint_events_;  // "sched_switch"
};

// "finish_task_switch.isra.0" -> "finish_task_switch".
std::string_view WithoutCloneSuffix(std::string_view function);

struct ForeignHook {
  std::string kind;
  std::string target;  // function, "category:event", "<binary>:0x<offset>", or what kind of BPF
  std::string owner;   // process name (comm) of the holder, "unknown" if none
  std::string unit;    // the holder's systemd unit, "none" if none
  bool hot = false;
  uint32_t prog_id = 0;  // the BPF program, 0 for other hooks
};

// A BPF program of someone else's, for its CPU cost.
struct ForeignProgram {
  uint32_t id = 0;
  std::string owner;
  std::string program;  // its name, "unnamed" if it has none
  uint64_t run_time_ns = 0;
  uint64_t run_count = 0;
};

struct TracingSources {
  std::optional<KprobeList> kprobe_list;  // nullopt: no debugfs kprobes/list here
  std::vector<ProbeEvent> probe_events;   // kprobe_events + uprobe_events + dynamic_events
  std::optional<FtraceFunctionList> enabled_functions;
};

struct BpfSources {
  std::vector<BpfProgramInfo> programs;
  std::vector<BpfLinkInfo> links;
  BpfHolders foreign;                                              // every process but kpathd
  BpfHolders own;                                                  // kpathd itself
  std::map<std::pair<uint32_t, uint32_t>, std::string> btf_names;  // (object, type) -> name
};

struct InventoryContext {
  pid_t own_pid = 0;  // libbpf names its legacy tracefs events libbpf_<pid>_...
  const HotTargets* hot = nullptr;
  // Tracepoint event name -> "category:event" (the name itself when unknown).
  std::function<std::string(std::string_view event)> qualify_tracepoint;
};

struct HookInventory {
  std::vector<ForeignHook> hooks;
  std::vector<ForeignProgram> programs;
  uint64_t hidden_kprobes = 0;           // kprobes + kretprobes, de-duplicated
  uint64_t hidden_kprobes_disabled = 0;  // of which [DISABLED] or [GONE]: registered, not armed
};

// De-duplication: a tracefs kprobe event, a kprobe of a BPF program and a kernel module's kprobe
// all show up in kprobes/list, and a tracefs event used by a BPF program (libbpf's legacy mode)
// shows up in both kprobe_events and BPF_TASK_FD_QUERY. Per function and probe type the hook
// count is max(list entries not kpathd's, tracefs events, BPF attachments); the BPF ones carry
// their holder as owner, the rest are "unknown". Uprobes likewise, per binary and offset. For
// enabled_functions, ftrace users beyond kprobes on the call site, BPF trampolines and fprobe
// events are counted as kind "ftrace". `bpf` is null when the BPF objects could not be listed.
HookInventory BuildHookInventory(const TracingSources& tracing, const BpfSources* bpf,
                                 const InventoryContext& context);

}  // namespace kpath
