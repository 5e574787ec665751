#include "probes/percpu/percpu_caller.h"

#include <array>

namespace kpath {

namespace {
bool StartsWith(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }
}  // namespace

bool IsPercpuPlumbingFrame(std::string_view fn) {
  // The allocator and its wrappers.
  static constexpr std::array kAllocator = {
      "pcpu_",
      "__pcpu_",
      "__alloc_percpu",
      "__alloc_reserved_percpu",
  };
  // The tracing plumbing between the event and the BPF program, named precisely: BPF's own
  // allocations (bpf_map_alloc_percpu, bpf_prog_alloc), perf's and tracing's are real callers.
  // A BPF program's own frame is its JIT symbol (BpfProgramName).
  static constexpr std::array kTracing = {
      "bpf_trace_run",    "__bpf_trace_",    "___bpf_prog_run",
      "__bpf_prog_enter", "__bpf_prog_exit", "bpf_trampoline_",
      "trace_call_bpf",   "perf_trace_",     "perf_tp_event",
      "kprobe_",          "__kprobes",       "kretprobe_",
      "ftrace_",          "arch_ftrace_",    "fentry_",
      "__probestub_",     "rethook_",        "trace_event_raw_event_",
  };
  for (std::string_view p : kAllocator)
    if (StartsWith(fn, p)) return true;
  for (std::string_view p : kTracing)
    if (StartsWith(fn, p)) return true;
  return BpfProgramName(fn).has_value() || fn == "unknown";
}

std::string PercpuCallerName(std::span<const unsigned long long> frames,
                             KernelSymbolizer& symbols) {
  // Frames above the allocator's own are the hook: an fentry program and its trampoline, which
  // kallsyms lists only with net.core.bpf_jit_kallsyms=1 and otherwise names as whatever
  // function lies below them (seen on Debian's 6.1 under QEMU: "exit_amd_microcode"). When the
  // allocator is on the stack, the caller is looked for past its outermost frame.
  size_t start = 0;
  for (size_t i = 0; i < frames.size() && frames[i] != 0; ++i) {
    const std::string& fn = symbols.Name(frames[i]);
    if (fn.starts_with("pcpu_alloc") || fn.starts_with("__alloc_percpu") ||
        fn.starts_with("__alloc_reserved_percpu")) {
      start = i;
    }
  }
  for (unsigned long long address : frames.subspan(start)) {
    if (address == 0) break;
    const std::string& fn = symbols.Name(address);
    if (!IsPercpuPlumbingFrame(fn)) return fn;
  }
  return "unknown";
}

}  // namespace kpath
