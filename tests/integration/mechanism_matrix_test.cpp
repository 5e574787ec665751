// Every way a probe can attach, one at a time, on the running kernel: each (mechanism, target)
// plan the probe lists and the kernel supports is attached alone, in this process, and counts
// the same workload run by a child with a name of its own. All plans must count it to the same
// number of calls, so that a host that falls back from tp_btf to a kprobe reports the same
// figures. The development kernel has only the tracepoint plans; Debian's 6.1 under QEMU
// (tests/qemu/run.sh) adds fentry and kprobe on pcpu_alloc, __alloc_percpu_gfp, the madvise
// syscall wrapper and do_madvise, and names them in KPATH_EXPECT_MECHANISMS so that a plan that
// does not attach there fails instead of being skipped.
#include <bpf/bpf.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "probes/cgroups/cgroup_churn_probe.h"
#include "probes/collect/metric_families.h"
#include "probes/collect/probe_attacher.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/kernel_features.h"
#include "probes/madvise/madvise_probe.h"
#include "probes/percpu/percpu_probe.h"
#include "probes/slab/slabinfo_readers_probe.h"
#include "support/cgroup_churn.h"
#include "support/expected_mechanisms.h"
#include "support/kpathd_process.h"
#include "support/probe_links.h"

using namespace kpath::testing;

namespace {

// Runs `work` in a child process named `comm`; true if it exited 0.
bool RunNamed(const std::string& comm, const std::function<bool()>& work) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
    _exit(work() ? 0 : 1);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// The value of `label` in a sample ("" if absent).
std::string LabelOf(const prometheus::ClientMetric& metric, const std::string& label) {
  for (const prometheus::ClientMetric::Label& l : metric.label) {
    if (l.name == label) return l.value;
  }
  return "";
}

// Sums over the samples of family `name` whose label `comm` is `comm`, by the value of `by`.
std::map<std::string, double> SumForComm(const kpath::MetricFamilies& families,
                                         const std::string& name, const std::string& comm,
                                         const std::string& by) {
  std::map<std::string, double> sums;
  for (const prometheus::MetricFamily& family : families) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      if (LabelOf(metric, "comm") == comm) sums[LabelOf(metric, by)] += metric.counter.value;
    }
  }
  return sums;
}

double SumForComm(const kpath::MetricFamilies& families, const std::string& name,
                  const std::string& comm) {
  double sum = 0;
  for (const auto& [key, value] : SumForComm(families, name, comm, "comm")) sum += value;
  return sum;
}

struct PlanCount {
  std::string plan;  // "kprobe pcpu_alloc"
  double calls = 0;
  double bytes = 0;
  std::map<std::string, double> callers;  // percpu: calls by kernel caller
};

std::string Table(const std::vector<PlanCount>& counts) {
  std::string text;
  for (const PlanCount& c : counts) {
    text += fmt::format("\n  {:<36} {:>6} calls {:>10} bytes", c.plan, c.calls, c.bytes);
    for (const auto& [caller, calls] : c.callers) text += fmt::format(" {}:{}", caller, calls);
  }
  return text;
}

// Attaches `probe` with `plan` alone; false (after failing the test where the kernel is known
// to have the mechanism, or warning why) when it cannot.
bool AttachAlone(kpath::AttachableProbe& probe, const kpath::AttachPlan& plan,
                 const std::string& probe_name) {
  std::string mechanism(kpath::MechanismName(plan.mechanism));
  absl::Status supported = probe.Supported(plan);
  if (!supported.ok()) {
    // A function this kernel does not have (pcpu_alloc_noprof before 6.10), or no kprobes at all.
    INFO(mechanism << " " << plan.target << ": " << supported.message());
    CHECK_FALSE(MustAttach(probe_name + "_functions", plan.target));
    return false;
  }
  absl::Status attached = probe.Attach(plan);
  if (attached.ok()) return true;
  if (kpath::IsBlindHook(attached)) {
    // The mechanism works; this function is off the path of the calls it should see (the
    // probe's own check call did not reach it): the next plan is the probe's answer.
    WARN(probe_name << " " << mechanism << " " << plan.target << ": " << attached.message());
    return false;
  }
  INFO(mechanism << " " << plan.target << ": " << attached.message());
  CHECK_FALSE(MustAttach(probe_name, mechanism));
  WARN(probe_name << " " << mechanism << " " << plan.target
                  << " not available on this kernel: " << attached.message());
  return false;
}

// Whether the verifier takes BPF compare-and-swap (Linux 5.12+), which the percpu probe's array
// table needs: asked of the kernel with a program of eight instructions that makes one, apart
// from the probe, whose own answer (loading the table or not) is what is checked against it.
bool KernelTakesBpfCmpxchg() {
  const bpf_insn insns[] = {
      {.code = BPF_ST | BPF_MEM | BPF_DW, .dst_reg = BPF_REG_10, .off = -8, .imm = 0},
      {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_1, .src_reg = BPF_REG_10},
      {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_1, .imm = -8},
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_2, .imm = 1},
      {.code = BPF_STX | BPF_ATOMIC | BPF_DW,
       .dst_reg = BPF_REG_1,
       .src_reg = BPF_REG_2,
       .imm = BPF_CMPXCHG},
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT},
  };
  int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "kpath_cas", "GPL", insns,
                         sizeof(insns) / sizeof(insns[0]), nullptr);
  if (fd < 0) return false;
  close(fd);
  return true;
}

// With the array table (or the allocation log) asked for: true if it is loaded; false if the probe
// fell back to the hash map, which it must do exactly where the verifier takes no
// compare-and-swap.
bool TableLoadedOrRefused(const kpath::PercpuAllocProbe& probe) {
  bool fell_back = false;
  for (const kpath::OwnBpfProgram& program : probe.Programs()) {
    fell_back = fell_back || program.program.ends_with("_hash");
  }
  // Checked both ways, so that the question itself is tested on every kernel: the table loads
  // exactly where the verifier takes compare-and-swap.
  CHECK(KernelTakesBpfCmpxchg() == !fell_back);
  if (!fell_back) return true;
  WARN(
      "the array table was refused here (no BPF compare-and-swap before Linux 5.12): its "
      "hash-map fallback, which the probe loaded, is the case tested");
  return false;
}

// Every plan of `probe` this kernel supports, attached alone: the probe's canary (SelfTest) is
// seen; with the links dropped and the maps kept (another tool detaching kpathd's programs), it
// is missed. Returns how many plans were tested.
int CheckCanaryOfEachPlan(kpath::BpfProbe& probe, const std::string& probe_name) {
  int tested = 0;
  for (const kpath::AttachPlan& plan : probe.Plans()) {
    if (!AttachAlone(probe, plan, probe_name)) continue;
    INFO(probe_name << " " << kpath::MechanismName(plan.mechanism) << " " << plan.target);
    std::optional<absl::Status> seen = probe.SelfTest();
    REQUIRE(seen);
    INFO(seen->message());
    CHECK(seen->ok());
    kpath::BpfProbeLinksForTest::Drop(probe);
    std::optional<absl::Status> blind = probe.SelfTest();
    REQUIRE(blind);
    INFO(blind->message());
    CHECK(absl::IsNotFound(*blind));
    probe.Detach();
    ++tested;
  }
  return tested;
}

}  // namespace

TEST_CASE("self-test: each percpu plan sees kpathd's own allocation, and misses it detached",
          "[percpu][selftest][matrix]") {
  REQUIRE(IsRoot());
  kpath::RouteLibbpfLogsToSpdlog();
  kpath::LiveKernelFeatures kernel(kpath::HostPaths(), /*may_mount=*/true);
  kpath::PercpuAllocProbe probe(kernel, kpath::HostPaths(), {});
  CHECK(CheckCanaryOfEachPlan(probe, "percpu_alloc") > 0);
}

TEST_CASE("self-test: each slabinfo_readers plan sees kpathd's own open, and misses it detached",
          "[slab][selftest][matrix]") {
  REQUIRE(IsRoot());
  kpath::RouteLibbpfLogsToSpdlog();
  kpath::LiveKernelFeatures kernel(kpath::HostPaths(), /*may_mount=*/true);
  kpath::SlabinfoReadersProbe probe(kernel, {}, kpath::LabelLimits{});
  CHECK(CheckCanaryOfEachPlan(probe, "slabinfo_readers") > 0);
}

TEST_CASE(
    "self-test: each cgroup_churn plan sees kpathd's own scratch cgroup, and misses it "
    "detached",
    "[cgroups][selftest][matrix]") {
  REQUIRE(IsRoot());
  kpath::RouteLibbpfLogsToSpdlog();
  kpath::LiveKernelFeatures kernel(kpath::HostPaths(), /*may_mount=*/true);
  kpath::CgroupChurnProbe probe(kernel, {});
  CHECK(CheckCanaryOfEachPlan(probe, "cgroup_churn") > 0);
}

TEST_CASE("percpu: every plan this kernel supports, attached alone, counts the same memcg churn",
          "[percpu][mechanisms][matrix]") {
  REQUIRE(IsRoot());
  auto root = MemoryCgroupRoot();
  REQUIRE(root);
  kpath::RouteLibbpfLogsToSpdlog();  // plans the kernel refuses are reported below, once
  kpath::LiveKernelFeatures kernel(kpath::HostPaths(), /*may_mount=*/true);
  constexpr int kCgroups = 50;
  std::vector<PlanCount> counts;
  kpath::PercpuAllocProbe probe(kernel, kpath::HostPaths(), {});
  for (const kpath::AttachPlan& plan : probe.Plans()) {
    std::string name = fmt::format("{} {}", kpath::MechanismName(plan.mechanism), plan.target);
    if (!AttachAlone(probe, plan, "percpu_alloc")) continue;
    std::string comm = fmt::format("kpm-{}", counts.size());
    kpath::MetricFamilies before;
    REQUIRE(probe.Collect(before).ok());
    REQUIRE(RunNamed(
        comm, [&] { return ChurnCgroups(*root, "kpath-matrix-" + comm, kCgroups) == kCgroups; }));
    kpath::MetricFamilies after;
    REQUIRE(probe.Collect(after).ok());
    probe.Detach();
    std::map<std::string, double> callers =
        SumForComm(after, "kpath_percpu_allocs_total", comm, "caller");
    for (auto& [caller, calls] : callers) calls /= kCgroups;
    counts.push_back({name, SumForComm(after, "kpath_percpu_allocs_total", comm) / kCgroups,
                      SumForComm(after, "kpath_percpu_alloc_bytes_total", comm) / kCgroups,
                      callers});
  }
  WARN("percpu allocations per memory cgroup created, by plan:" << Table(counts));
  REQUIRE_FALSE(counts.empty());
  // pcpu_alloc(_noprof) is the allocator itself: every plan on it or on its tracepoint sees
  // every allocation, from the same callers. __alloc_percpu_gfp is one of its entry points
  // (alloc_percpu() without a gfp argument goes straight to pcpu_alloc before 6.10), so it sees
  // a part of them. Bytes: the tracepoint's bytes_alloc (5.19+) adds what memcg accounting
  // charges on top of size x CPUs (a pointer per 4 bytes: pcpu_obj_full_size()), which entry
  // probes cannot see; without bytes_alloc, every plan counts size x possible CPUs.
  const PlanCount& reference = counts.front();
  CHECK(reference.calls >= 1);
  const PlanCount* entry_reference = nullptr;
  for (const PlanCount& c : counts) {
    INFO(c.plan);
    CHECK(c.callers.count("unknown") == 0);  // every allocation named by its caller
    bool entry_probe = c.plan.starts_with("fentry") || c.plan.starts_with("kprobe");
    if (c.plan.ends_with("__alloc_percpu_gfp")) {
      CHECK(c.calls >= 1);
      CHECK(c.calls <= reference.calls);
      continue;
    }
    CHECK(c.calls == reference.calls);
    CHECK(c.callers == reference.callers);
    if (!entry_probe) {
      CHECK(c.bytes == reference.bytes);
    } else if (entry_reference == nullptr) {
      entry_reference = &c;
      CHECK(c.bytes <= reference.bytes);
    } else {
      CHECK(c.bytes == entry_reference->bytes);
    }
  }
}

namespace {

// The value of the counter or gauge `name` whose label `label` is `value` (0 if absent).
double SampleValue(const kpath::MetricFamilies& families, const std::string& name,
                   const std::string& label, const std::string& value) {
  for (const prometheus::MetricFamily& family : families) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      if (LabelOf(metric, label) != value) continue;
      return family.type == prometheus::MetricType::Gauge ? metric.gauge.value
                                                          : metric.counter.value;
    }
  }
  return 0;
}

// In a child named `comm`: `count` memory cgroups under `parent` that each get a page of shm
// charged and are removed, so that they stay dying with their percpu memory (seed 000).
bool LeakMemoryCgroups(const std::string& comm, const std::string& parent, int count) {
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    return static_cast<bool>(out.flush());
  };
  return RunNamed(comm, [&] {
    std::string self = std::to_string(getpid());
    for (int i = 0; i < count; ++i) {
      std::string cg = parent + "/leak-" + std::to_string(i);
      if (mkdir(cg.c_str(), 0755) != 0 || !write(cg + "/cgroup.procs", self) ||
          !write("/dev/shm/kpath-matrix-leak-" + std::to_string(i), std::string(4096, 'x')) ||
          // Out again, to the hierarchy's root: under cgroup v2 the parent, which delegates the
          // memory controller to its children, may hold no process ("no internal processes").
          !write(std::filesystem::path(parent).parent_path().string() + "/cgroup.procs", self) ||
          rmdir(cg.c_str()) != 0) {
        return false;
      }
    }
    return true;
  });
}

}  // namespace

// The ways the percpu probe keeps live allocations, as options that force each, and the suffix
// of its programs.
struct LiveTracking {
  const char* name;
  bool live_table;
  bool allocation_log;
  const char* suffix;
};
constexpr LiveTracking kLiveTrackings[] = {{"allocation log", true, true, "_log"},
                                           {"array table", true, false, ""},
                                           {"hash map", false, false, "_hash"}};

// Whether every program of `probe` is of `way` (the table's have neither suffix).
bool ProgramsOf(const kpath::PercpuAllocProbe& probe, const LiveTracking& way) {
  for (const kpath::OwnBpfProgram& program : probe.Programs()) {
    bool log = program.program.ends_with("_log"), hash = program.program.ends_with("_hash");
    if (std::string_view(way.suffix) == "_log"    ? !log
        : std::string_view(way.suffix) == "_hash" ? !hash
                                                  : (log || hash)) {
      return false;
    }
  }
  return true;
}

TEST_CASE(
    "percpu: the allocation log, the array table and its hash-map fallback match frees to "
    "allocations alike, through every tracepoint mechanism",
    "[percpu][mechanisms][matrix][outstanding]") {
  REQUIRE(IsRoot());
  auto root = MemoryCgroupRoot();
  REQUIRE(root);
  kpath::RouteLibbpfLogsToSpdlog();
  kpath::LiveKernelFeatures kernel(kpath::HostPaths(), /*may_mount=*/true);
  const std::string caller = "mem_cgroup_css_alloc";
  const std::string parent = *root + "/kpath-matrix-outstanding.slice";
  constexpr int kChurn = 300, kLeak = 20;
  // The fallbacks are what kernels without BPF atomics (before 5.12) load: forced here.
  for (const LiveTracking& way : kLiveTrackings) {
    for (kpath::Mechanism mechanism :
         {kpath::Mechanism::kTpBtf, kpath::Mechanism::kRawTp, kpath::Mechanism::kTracepoint}) {
      std::string name = fmt::format("{} with the {}", kpath::MechanismName(mechanism), way.name);
      DYNAMIC_SECTION(name) {
        kpath::PercpuAllocProbe probe(
            kernel, kpath::HostPaths(),
            {.live_table = way.live_table, .allocation_log = way.allocation_log});
        const kpath::AttachPlan plan{mechanism, "percpu:percpu_alloc_percpu"};
        if (!AttachAlone(probe, plan, "percpu_alloc")) continue;
        if (way.live_table && !TableLoadedOrRefused(probe)) continue;
        CHECK(ProgramsOf(probe, way));
        mkdir(parent.c_str(), 0755);
        if (std::filesystem::exists(*root + "/cgroup.subtree_control")) {
          std::ofstream(*root + "/cgroup.subtree_control") << "+memory";
          std::ofstream(parent + "/cgroup.subtree_control") << "+memory";
        }
        kpath::MetricFamilies start;
        REQUIRE(probe.Collect(start).ok());
        // Churn: every memcg's percpu memory is freed soon after its rmdir (RCU, a workqueue).
        REQUIRE(
            RunNamed("kpo-churn", [&] { return ChurnCgroups(parent, "churn", kChurn) == kChurn; }));
        bool leaked_all = LeakMemoryCgroups("kpo-leak", parent, kLeak);
        kpath::MetricFamilies now;
        double churned = 0, leaked = 0, outstanding = 0;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
        do {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          now.clear();
          REQUIRE(probe.Collect(now).ok());
          churned =
              SumForComm(now, "kpath_percpu_alloc_bytes_total", "kpo-churn", "caller")[caller];
          leaked = SumForComm(now, "kpath_percpu_alloc_bytes_total", "kpo-leak", "caller")[caller];
          outstanding = SampleValue(now, "kpath_percpu_outstanding_bytes", "caller", caller);
        } while (outstanding > leaked + churned / 2 && std::chrono::steady_clock::now() < deadline);
        probe.Detach();
        for (int i = 0; i < kLeak; ++i) {
          unlink(("/dev/shm/kpath-matrix-leak-" + std::to_string(i)).c_str());
        }
        rmdir(parent.c_str());
        REQUIRE(leaked_all);
        INFO(name << ": churned " << churned << " bytes, leaked " << leaked << ", outstanding "
                  << outstanding);
        CHECK(churned > 0);
        CHECK(leaked > 0);
        // Every leaked byte is still held; the churned ones were matched to their frees (other
        // processes' memcgs, created meanwhile, can only add to what is outstanding).
        CHECK(outstanding >= leaked);
        CHECK(outstanding <= leaked + churned / 2);
        CHECK(SampleValue(now, "kpath_events_lost_total", "reason", "tracking_map_full") == 0);
        CHECK(SampleValue(now, "kpath_events_lost_total", "reason", "log_full") == 0);
      }
    }
  }
}

TEST_CASE(
    "percpu: tens of thousands of live allocations, more than the table's hot part holds, are "
    "matched to their frees",
    "[percpu][mechanisms][outstanding]") {
  REQUIRE(IsRoot());
  kpath::RouteLibbpfLogsToSpdlog();
  kpath::LiveKernelFeatures kernel(kpath::HostPaths(), /*may_mount=*/true);
  // A preallocated per-CPU hash map allocates per-CPU memory for each of its elements and frees
  // it when the map goes: long-lived allocations by the thousand, the case the table's spill
  // part exists for. The caller is bpf_map_alloc_percpu since 5.11 (prealloc_init before): the
  // one that allocated most while the map was made.
  constexpr uint32_t kElements = 30000;
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  for (const LiveTracking& way : kLiveTrackings) {
    DYNAMIC_SECTION(way.name) {
      kpath::PercpuAllocProbe probe(kernel, kpath::HostPaths(),
                                    {.max_tracked_allocations = 2 * kElements,
                                     .live_table = way.live_table,
                                     .allocation_log = way.allocation_log});
      const kpath::AttachPlan plan{kpath::Mechanism::kTpBtf, "percpu:percpu_alloc_percpu"};
      if (!AttachAlone(probe, plan, "percpu_alloc")) continue;
      if (way.live_table && !TableLoadedOrRefused(probe)) continue;
      CHECK(ProgramsOf(probe, way));
      kpath::MetricFamilies before, held, after;
      REQUIRE(probe.Collect(before).ok());
      int map = bpf_map_create(BPF_MAP_TYPE_PERCPU_HASH, "kpath_test_pc", sizeof(uint64_t),
                               sizeof(uint64_t), kElements, nullptr);
      REQUIRE(map >= 0);
      REQUIRE(probe.Collect(held).ok());
      close(map);
      std::string caller;
      {
        auto held_by = SumForComm(held, "kpath_percpu_alloc_bytes_total", comm, "caller");
        auto before_by = SumForComm(before, "kpath_percpu_alloc_bytes_total", comm, "caller");
        double most = 0;
        for (const auto& [name, bytes] : held_by) {
          double added = bytes - before_by[name];
          if (added > most) {
            most = added;
            caller = name;
          }
        }
      }
      INFO("the map's elements' caller: " << caller);
      // The map's memory is freed after an RCU grace period, from a workqueue.
      double outstanding = 0;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
      double allocated = 0, at_start = 0, while_held = 0;
      do {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        after.clear();
        REQUIRE(probe.Collect(after).ok());
        allocated = SumForComm(held, "kpath_percpu_alloc_bytes_total", comm, "caller")[caller] -
                    SumForComm(before, "kpath_percpu_alloc_bytes_total", comm, "caller")[caller];
        at_start = SampleValue(before, "kpath_percpu_outstanding_bytes", "caller", caller);
        while_held = SampleValue(held, "kpath_percpu_outstanding_bytes", "caller", caller);
        outstanding = SampleValue(after, "kpath_percpu_outstanding_bytes", "caller", caller);
      } while (outstanding > at_start + allocated / 20 &&
               std::chrono::steady_clock::now() < deadline);
      probe.Detach();
      INFO("allocated " << allocated << " bytes; outstanding at start " << at_start
                        << ", with the map " << while_held << ", after it " << outstanding);
      CHECK(allocated >= kElements * 8.0);
      CHECK(SampleValue(held, "kpath_events_lost_total", "reason", "tracking_map_full") == 0);
      CHECK(SampleValue(after, "kpath_events_lost_total", "reason", "log_full") == 0);
      // Every element's memory was held, and given back (others' maps can only add).
      CHECK(while_held - at_start >= allocated);
      CHECK(while_held - outstanding >= allocated);
    }
  }
}

TEST_CASE("madvise: every plan this kernel supports, attached alone, counts exactly the calls made",
          "[madvise][mechanisms][matrix]") {
  REQUIRE(IsRoot());
  kpath::RouteLibbpfLogsToSpdlog();
  kpath::LiveKernelFeatures kernel(kpath::HostPaths(), /*may_mount=*/true);
  constexpr int kCalls = 5000;
  constexpr size_t kPage = 4096;
  std::vector<PlanCount> counts;
  kpath::MadviseProbe probe(kernel, {});
  for (const kpath::AttachPlan& plan : probe.Plans()) {
    std::string name = fmt::format("{} {}", kpath::MechanismName(plan.mechanism), plan.target);
    if (!AttachAlone(probe, plan, "madvise")) continue;
    std::string comm = fmt::format("kmm-{}", counts.size());
    kpath::MetricFamilies before;
    REQUIRE(probe.Collect(before).ok());
    REQUIRE(RunNamed(comm, [&] {
      void* page = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (page == MAP_FAILED) return false;
      for (int i = 0; i < kCalls; ++i) {
        if (madvise(page, kPage, MADV_DONTNEED) != 0) return false;
      }
      return true;
    }));
    kpath::MetricFamilies after;
    REQUIRE(probe.Collect(after).ok());
    probe.Detach();
    counts.push_back({name, SumForComm(after, "kpath_madvise_calls_total", comm),
                      SumForComm(after, "kpath_madvise_bytes_total", comm)});
  }
  WARN(kCalls << " madvise(MADV_DONTNEED) calls on one page, counted by plan:" << Table(counts));
  REQUIRE_FALSE(counts.empty());
  for (const PlanCount& c : counts) {
    INFO(c.plan);
    CHECK(c.calls == kCalls);
    CHECK(c.bytes == kCalls * static_cast<double>(kPage));
  }
}
