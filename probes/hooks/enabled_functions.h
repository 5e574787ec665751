// tracefs `enabled_functions`: every kernel function whose ftrace call site is live, with the
// number of ftrace users (ftrace_ops) on it. Those users are the function and function_graph
// tracers, fprobes, livepatches, kprobes placed on the call site ([FTRACE] in kprobes/list) and
// BPF trampolines (fentry/fexit/LSM, flag D). Pure parser. Lines (kernel/trace/ftrace.c t_show):
//   vfs_read (1) R I  \ttramp: 0xffffffffc0400000 (function_trace_call+0x0/0x1b0)
//   ->function_trace_call+0x0/0x1b0 tcp_drop (1) R I D      tramp: ftrace_regs_caller+0x0/0x58
//   (call_direct_funcs+0x0/0x30) \tdirect-->bpf_trampoline_6442550536_0+0x0/0x1000 (continuation of
//   the line above) vfs_read (2)            ->arch_ftrace_ops_list_func+0x0/0x210
// Some kernels (lockdown, this development machine) refuse to let even root read it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kpath {

struct FtraceFunction {
  std::string function;  // "vfs_read"
  std::string module;    // "" for vmlinux
  uint32_t users = 0;    // ftrace_ops on the call site: the "(n)" count
  bool direct = false;   // a BPF trampoline (or another direct caller) is one of the users
  bool kprobe = false;   // a kprobe through ftrace is one of the users (its handler is named)
  std::string handler;   // the callback named after "->" or in the trampoline's parentheses
};

struct FtraceFunctionList {
  std::vector<FtraceFunction> functions;
  size_t unparsed_lines = 0;
};

FtraceFunctionList ParseEnabledFunctions(std::string_view text);

}  // namespace kpath
