// tracefs dynamic events: kprobe_events, uprobe_events and dynamic_events (their union, 5.0+,
// with fprobe, tracepoint-probe, eprobe, synthetic and user events besides). Pure parser of the
// files' text. Lines look like (kernel/trace/trace_{kprobe,uprobe,fprobe}.c show functions):
//   p:kprobes/p_vfs_read_0 vfs_read file=$arg1:x64        kprobe on a function
//   r16:kprobes/myretprobe do_sys_open ret=$retval          kretprobe, maxactive 16
//   p:kprobes/x ext4:ext4_file_open | vfs_read+16 | 0x...  module symbol, offset, raw address
//   p:uprobes/p_bash_0x4adf0 /bin/bash:0x000000000004adf0  uprobe (r: uretprobe); "(0x..)" ref ctr
//   f:fprobes/vfs_read__exit vfs_read%return arg1=$retval  fprobe (function entry/exit, ftrace)
//   t:tracepoints/kfree kfree ptr=ptr                      tracepoint probe
//   e:eprobes/x timer.hrtimer_cancel ..., s:synthetic/..., u:name ...   not kernel hooks
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kpath {

enum class ProbeEventType {
  kKprobe,
  kKretprobe,
  kUprobe,
  kUretprobe,
  kFprobe,           // function entry through ftrace
  kFprobeReturn,     // function exit through ftrace
  kTracepointProbe,  // "t:" (6.5+)
  kOther,            // eprobes, synthetic and user events: they hook no kernel code themselves
};

struct ProbeEvent {
  ProbeEventType type = ProbeEventType::kOther;
  std::string group;   // "kprobes"
  std::string event;   // "p_vfs_read_0"
  std::string target;  // kernel function, tracepoint, or (uprobes) the binary's path
  std::string module;  // "ext4" for "ext4:ext4_file_open"
  uint64_t offset = 0;
  bool by_address = false;  // a kprobe on a raw address: target is the address text
};

struct ProbeEventList {
  std::vector<ProbeEvent> events;
  size_t unparsed_lines = 0;
};

// Parses kprobe_events, uprobe_events or dynamic_events. Comment lines ('#') are skipped. An
// fprobe on a list of functions ("vfs_read,!vfs_write,vfs_open", 6.16+) yields one event per
// included function.
ProbeEventList ParseProbeEvents(std::string_view text);

}  // namespace kpath
