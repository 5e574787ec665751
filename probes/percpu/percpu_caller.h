// Naming the caller of a percpu allocation from the return addresses the BPF programs saw.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "probes/kernel/kernel_symbolizer.h"

namespace kpath {

// True for frames that are not the allocation's real caller: the percpu allocator itself and
// the tracing plumbing between the tracepoint and the program (bpf_trace_run*, __bpf_trace_*,
// perf_trace_*, kprobe and ftrace trampolines).
bool IsPercpuPlumbingFrame(std::string_view function);

// The caller of a percpu allocation: the first frame that is not plumbing, "unknown" if none.
// (Frames are __u64, which is unsigned long long, as the BPF side writes them.)
std::string PercpuCallerName(std::span<const unsigned long long> frames, KernelSymbolizer& symbols);

}  // namespace kpath
