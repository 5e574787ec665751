// Naming the caller of a percpu allocation from return addresses, on a real 6.18 kallsyms.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

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

namespace {
// A kallsyms of three vmlinux functions and one module function, under a fresh root per test
// (the process-wide vmlinux index is keyed by path).
constexpr const char* kSmallKallsyms =
    "ffffffff81000000 T _stext\n"
    "ffffffff81001000 T mem_cgroup_css_alloc\n"
    "ffffffff81002000 t percpu_ref_init.isra.0\n"
    "ffffffff81004000 T _etext\n"
    "ffffffffc0100000 t ftrace_trampoline\t[__builtin__ftrace]\n";

std::filesystem::path SmallRoot(const std::string& test) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kpath-symbolizer-" + test + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "proc");
  std::ofstream(dir / "proc" / "kallsyms") << kSmallKallsyms;
  std::ofstream(dir / "proc" / "modules") << "kvm 1 0 - Live 0x0000000000000000\n";
  return dir;
}
}  // namespace

TEST_CASE(
    "a module symbol that appears later is named once /proc/modules changes; vmlinux is "
    "not re-read",
    "[percpu][symbols]") {
  std::filesystem::path dir = SmallRoot("modules");
  KernelSymbolizer symbols(HostPaths(dir / "proc", dir / "sys"), nullptr,
                           std::chrono::hours(1));  // no re-read on demand in this test
  REQUIRE(symbols.Refresh().ok());
  CHECK(symbols.reloads() == 1);
  const uint64_t in_module = 0xffffffffc0300040;
  CHECK(symbols.Name(0xffffffff81002010) == "percpu_ref_init");
  CHECK(symbols.Name(in_module) == "ftrace_trampoline");

  // A module loads: its symbols are listed. vmlinux's lines are rewritten too, to show that
  // part is never read again.
  std::ofstream(dir / "proc" / "kallsyms")
      << "ffffffff81000000 T _stext\n"
         "ffffffff81001000 T renamed_a\n"
         "ffffffff81002000 t renamed_b\n"
         "ffffffff81004000 T _etext\n"
         "ffffffffc0100000 t ftrace_trampoline\t[__builtin__ftrace]\n"
         "ffffffffc0300000 t ext4_fill_super\t[ext4]\n";
  REQUIRE(symbols.Refresh().ok());
  CHECK(symbols.reloads() == 1);  // /proc/modules unchanged: nothing re-read
  CHECK(symbols.Name(in_module) == "ftrace_trampoline");
  std::ofstream(dir / "proc" / "modules", std::ios::app) << "ext4 1 0 - Live 0x0000000000000000\n";
  REQUIRE(symbols.Refresh().ok());
  CHECK(symbols.reloads() == 2);
  CHECK(symbols.Name(in_module) == "ext4_fill_super");
  CHECK(symbols.Name(0xffffffff81002010) == "percpu_ref_init");
  CHECK(symbols.Name(0xffffffff81001010) == "mem_cgroup_css_alloc");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a BPF program that appears later is named on demand, at most once per re-read period",
          "[percpu][symbols]") {
  std::filesystem::path dir = SmallRoot("bpf");
  auto now = std::chrono::steady_clock::time_point{};
  KernelSymbolizer symbols(HostPaths(dir / "proc", dir / "sys"), nullptr, std::chrono::seconds(10),
                           [&] { return now; });
  REQUIRE(symbols.Refresh().ok());
  const uint64_t in_program = 0xffffffffc0200040;
  std::ofstream(dir / "proc" / "kallsyms", std::ios::app)
      << "ffffffffc0200000 t bpf_prog_6deef7357e7b4530_percpu_alloc_tp\t[bpf]\n";
  now += std::chrono::seconds(5);  // too soon: not re-read
  CHECK(symbols.Name(in_program) == "ftrace_trampoline");
  CHECK(symbols.reloads() == 1);
  now += std::chrono::seconds(6);
  CHECK(symbols.Name(in_program + 1) == "bpf_prog_6deef7357e7b4530_percpu_alloc_tp");
  CHECK(symbols.reloads() == 2);
  // A vmlinux address never causes a re-read.
  now += std::chrono::seconds(60);
  CHECK(symbols.Name(0xffffffff81001010) == "mem_cgroup_css_alloc");
  CHECK(symbols.reloads() == 2);
  std::filesystem::remove_all(dir);
}
