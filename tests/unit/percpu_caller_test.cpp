// Naming the caller of a percpu allocation from return addresses, on a real 6.18 kallsyms.
#include <catch2/catch.hpp>

#include "probes/percpu/percpu_probe.h"

using namespace kpath;

namespace {
const std::string kRoot = std::string(KPATH_FIXTURES) + "/linux-6.18.44-x86_64";
// Addresses from tests/fixtures/linux-6.18.44-x86_64/proc/kallsyms.
constexpr unsigned long long kBpfTracePercpuAlloc = 0xffffffff815da570ULL;
constexpr unsigned long long kPcpuAllocNoprof = 0xffffffff815dcfa0ULL;
constexpr unsigned long long kMemCgroupCssAlloc = 0xffffffff82264b30ULL;
constexpr unsigned long long kPercpuRefInit = 0xffffffff81bb5990ULL;
}  // namespace

TEST_CASE("allocator and tracing frames are plumbing, real callers are not", "[percpu]") {
  for (const char* fn :
       {"pcpu_alloc_noprof", "pcpu_alloc", "__alloc_percpu_gfp", "__alloc_percpu",
        "__alloc_reserved_percpu", "bpf_trace_run10", "__bpf_trace_percpu_alloc_percpu",
        "perf_trace_percpu_alloc_percpu", "bpf_prog_6deef7357e7b4530_percpu_alloc_tp",
        "bpf_trampoline_6442", "trace_event_raw_event_percpu_alloc_percpu", "kprobe_ftrace_handler",
        "unknown"}) {
    INFO(fn);
    CHECK(IsPercpuPlumbingFrame(fn));
  }
  for (const char* fn :
       {"mem_cgroup_css_alloc", "css_rstat_init", "percpu_ref_init", "__percpu_counter_init_many",
        "mm_init", "psi_cgroup_alloc", "alloc_vfsmnt", "memcg1_alloc_events",
        // BPF's own kernel functions are callers; only a program's JIT symbol is plumbing.
        "bpf_prog_alloc", "bpf_prog_alloc_no_stats", "bpf_prog_realloc", "bpf_map_alloc_percpu"}) {
    INFO(fn);
    CHECK_FALSE(IsPercpuPlumbingFrame(fn));
  }
}

TEST_CASE("the tracepoint's call_site names the caller directly", "[percpu]") {
  KernelSymbolizer symbols(HostPaths(kRoot + "/proc", kRoot + "/sys"));
  REQUIRE(symbols.Refresh().ok());
  unsigned long long frames[8] = {kMemCgroupCssAlloc + 0x9a};
  CHECK(PercpuCallerName(frames, symbols) == "mem_cgroup_css_alloc");
}

TEST_CASE("from a stack sample the first frame past the plumbing is the caller", "[percpu]") {
  KernelSymbolizer symbols(HostPaths(kRoot + "/proc", kRoot + "/sys"));
  REQUIRE(symbols.Refresh().ok());
  unsigned long long frames[8] = {kBpfTracePercpuAlloc + 0x4c, kPcpuAllocNoprof + 0x3e1,
                                  kPercpuRefInit + 0x55, kMemCgroupCssAlloc + 0x20};
  CHECK(PercpuCallerName(frames, symbols) == "percpu_ref_init");
}

TEST_CASE("frames of an unnamed fentry program and trampoline above the allocator are skipped",
          "[percpu]") {
  // As Debian's 6.1 records them under QEMU (tests/qemu): with net.core.bpf_jit_kallsyms off,
  // the program and its trampoline in module space symbolize as the last function below them.
  KernelSymbolizer symbols(HostPaths(kRoot + "/proc", kRoot + "/sys"));
  REQUIRE(symbols.Refresh().ok());
  unsigned long long frames[8] = {0xffffffffc0000740ULL, 0xffffffffc021904cULL,
                                  kPcpuAllocNoprof + 5, kPercpuRefInit + 0x23,
                                  kMemCgroupCssAlloc + 0x20};
  CHECK(PercpuCallerName(frames, symbols) == "percpu_ref_init");
}

TEST_CASE("a stack of plumbing only, or an empty one, is unknown", "[percpu]") {
  KernelSymbolizer symbols(HostPaths(kRoot + "/proc", kRoot + "/sys"));
  REQUIRE(symbols.Refresh().ok());
  unsigned long long plumbing[8] = {kBpfTracePercpuAlloc + 1, kPcpuAllocNoprof + 2};
  CHECK(PercpuCallerName(plumbing, symbols) == "unknown");
  unsigned long long empty[8] = {};
  CHECK(PercpuCallerName(empty, symbols) == "unknown");
}

TEST_CASE("without kallsyms every caller is unknown", "[percpu]") {
  KernelSymbolizer symbols(HostPaths("/nonexistent/proc", "/nonexistent/sys"));
  CHECK_FALSE(symbols.Refresh().ok());
  unsigned long long frames[8] = {kMemCgroupCssAlloc};
  CHECK(PercpuCallerName(frames, symbols) == "unknown");
}

TEST_CASE("linker section markers are not functions", "[percpu][symbols]") {
  for (const char* m :
       {"_stext", "_text", "_etext", "_sinittext", "_einittext", "__irqentry_text_end",
        "__entry_text_end", "__start___ksymtab", "__stop___param", "_end"}) {
    INFO(m);
    CHECK(IsLinkerMarkerSymbol(m));
  }
  for (const char* f : {"mem_cgroup_css_alloc", "pcpu_alloc_noprof", "set_text", "do_exit",
                        "_raw_spin_lock", "__schedule", "text_poke", "ext4_read"}) {
    INFO(f);
    CHECK_FALSE(IsLinkerMarkerSymbol(f));
  }
}
