// <debugfs>/kprobes/list and <debugfs>/kprobes/enabled: every kprobe and kretprobe registered in
// the kernel, whoever registered it (a kernel module, a tracefs kprobe event, perf or a BPF
// program). Seed 002 found a host-security agent's probes only by comparing this file with a
// healthy host's. Pure parsers of the files' text.
//
// A line is written by kernel/kprobes.c report_probe():
//   "%px  %s  %s+0x%x  %s " address, type (k, r; j for jprobes before 4.15), symbol+offset,
//                           module name or " "; or "%px  %s  %pS " when no symbol is known
//   then the flags, concatenated: [GONE] [DISABLED] [OPTIMIZED] [FTRACE]
// The address is 0 when the reader may not see kernel addresses (kptr_restrict), and hashed
// on 4.15-4.16.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kpath {

struct KprobeListEntry {
  uint64_t address = 0;
  bool is_return = false;  // "r": a kretprobe
  std::string function;    // "security_file_permission", as the kernel names it (clone suffix kept)
  uint64_t offset = 0;     // bytes into the function
  std::string module;      // module of the probed function; "" for vmlinux
  bool gone = false;       // its module was unloaded: inactive
  bool disabled = false;   // registered but disarmed: costs nothing until enabled
  bool optimized = false;  // a jump instead of a breakpoint
  bool ftrace = false;     // through the function's ftrace call site
};

struct KprobeList {
  std::vector<KprobeListEntry> entries;
  size_t unparsed_lines = 0;  // lines in no known format (skipped, not fatal)
};

// Parses the list. An error only when no line of non-empty text could be parsed.
absl::StatusOr<KprobeList> ParseKprobeList(std::string_view text);

// The global switch `kprobes/enabled` ("1" or "0"): 0 disarms every kprobe (seed 002's fix).
absl::StatusOr<bool> ParseKprobesEnabled(std::string_view text);

}  // namespace kpath
