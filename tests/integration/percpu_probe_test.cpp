// The percpu allocation probe on the real kernel, one mechanism at a time, driven by real memory
// cgroup churn (each new memcg allocates per-CPU memory, seed 000).
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "support/cgroup_churn.h"
#include "support/expected_mechanisms.h"
#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

std::string ConfigRestrictedTo(const std::string& mechanism) {
  return "sampling_interval: 200ms\n"
         "probes:\n"
         "  percpu_alloc:\n"
         "    mechanisms: [" +
         mechanism + "]\n";
}

// Waits until a scrape shows `name` at `at_least` or more; returns the last value seen.
double WaitForValue(KpathdProcess& kpathd, const std::string& name, double at_least,
                    std::chrono::milliseconds timeout = 5s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  double last = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto body = kpathd.Scrape()) last = SumMetric(*body, name);
    if (last >= at_least) break;
    std::this_thread::sleep_for(100ms);
  }
  return last;
}

// Whether kpathd attached percpu_alloc with `mechanism`. If not, the test fails where the kernel
// has it: tp_btf, raw_tp and tracepoint on every kernel with BTF (the development one too) unless
// the kernel matrix says otherwise; fentry and kprobe where KPATH_EXPECT_MECHANISMS lists them
// (Debian's 6.1 under QEMU). Otherwise it warns why the mechanism is skipped.
bool AttachedOrLacking(KpathdProcess& kpathd, const std::string& body,
                       const std::string& mechanism) {
  if (MetricValue(body, "kpath_probe_attached",
                  {{"probe", "percpu_alloc"}, {"mechanism", mechanism}}) == 1) {
    return true;
  }
  INFO(kpathd.Output());
  std::optional<std::set<std::string>> expected = ExpectedMechanisms("percpu_alloc");
  // tp_btf needs the kernel's BTF; raw_tp and tracepoint attach on every kernel kpathd supports.
  bool tracepoint_family = mechanism == "raw_tp" || mechanism == "tracepoint" ||
                           (mechanism == "tp_btf" && HostHasVmlinuxBtf());
  REQUIRE((expected || !tracepoint_family));
  REQUIRE_FALSE(MustAttach("percpu_alloc", mechanism));
  WARN("percpu_alloc " << mechanism << " not available on this kernel: "
                       << NotAttachedReason(kpathd.Output(), "percpu_alloc"));
  return false;
}

}  // namespace

TEST_CASE("each percpu mechanism this kernel has attaches alone and counts memcg creations",
          "[percpu][mechanisms]") {
  REQUIRE(IsRoot());
  auto root = MemoryCgroupRoot();
  REQUIRE(root);  // the memory controller is mounted on every kernel kpathd supports
  // tp_btf, raw_tp and classic tracepoints all attach on the development kernel (6.18); fentry
  // and kprobe (on pcpu_alloc) run on the QEMU kernel matrix (tests/qemu, Debian's 6.1).
  for (std::string mechanism : {"tp_btf", "raw_tp", "tracepoint", "fentry", "kprobe"}) {
    DYNAMIC_SECTION("mechanism " << mechanism) {
      KpathdProcess kpathd({.config_yaml = ConfigRestrictedTo(mechanism)});
      REQUIRE(kpathd.WaitUntilServing());
      auto body = kpathd.Scrape();
      REQUIRE(body);
      INFO(kpathd.Output());
      if (!AttachedOrLacking(kpathd, *body, mechanism)) continue;
      // Counters by (comm, caller): their sum is every allocation seen.
      double allocs0 = SumMetric(*body, "kpath_percpu_allocs_total");
      double bytes0 = SumMetric(*body, "kpath_percpu_alloc_bytes_total");

      constexpr int kCgroups = 100;
      REQUIRE(ChurnCgroups(*root, "kpath-test-percpu-" + mechanism, kCgroups) == kCgroups);
      // Every memcg allocates its per-CPU statistics: at least one allocation per cgroup, and
      // on the order of kilobytes per CPU each.
      double allocs1 = WaitForValue(kpathd, "kpath_percpu_allocs_total", allocs0 + kCgroups);
      CHECK(allocs1 >= allocs0 + kCgroups);
      double bytes1 = SumMetric(*kpathd.Scrape(), "kpath_percpu_alloc_bytes_total");
      CHECK(bytes1 - bytes0 >= kCgroups * 1024.0);
    }
  }
}

TEST_CASE("a mechanism the kernel lacks leaves the probe detached with the reason logged",
          "[percpu][mechanisms]") {
  REQUIRE(IsRoot());
  // Without kprobes (CONFIG_KPROBES off here) or fentry, restricting to them attaches nothing.
  // On a kernel that has them the probe attaches: both outcomes are checked for consistency.
  KpathdProcess kpathd({.config_yaml = ConfigRestrictedTo("kprobe")});
  REQUIRE(kpathd.WaitUntilServing());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  bool kprobes = std::filesystem::exists("/sys/bus/event_source/devices/kprobe");
  INFO(kpathd.Output());
  if (kprobes) {
    CHECK(MetricValue(*body, "kpath_probe_attached", {{"mechanism", "kprobe"}}) == 1);
  } else {
    CHECK(MetricValue(*body, "kpath_probe_attached",
                      {{"probe", "percpu_alloc"}, {"mechanism", "none"}}) == 0);
    CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "percpu_alloc"}}) == 0);
    CHECK(kpathd.Output().find("probe percpu_alloc: not attached") != std::string::npos);
    CHECK(kpathd.Output().find("tp_btf percpu:percpu_alloc_percpu: not in the configured "
                               "mechanisms") != std::string::npos);
    // The rest of the daemon keeps working.
    CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "meminfo"}}) == 1);
  }
}

TEST_CASE("the default order picks tp_btf on a kernel with BTF", "[percpu][mechanisms]") {
  REQUIRE(IsRoot());
  if (!HostHasVmlinuxBtf()) {
    WARN("skipped: no vmlinux BTF (hidden, or a kernel built without it)");
    return;
  }
  KpathdProcess kpathd({});
  REQUIRE(kpathd.WaitUntilServing());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  CHECK(MetricValue(*body, "kpath_probe_attached",
                    {{"probe", "percpu_alloc"}, {"mechanism", "tp_btf"}}) == 1);
  CHECK(kpathd.Output().find("probe percpu_alloc: attached with tp_btf") != std::string::npos);
}

TEST_CASE("own BPF cost is exported while the kernel keeps BPF statistics", "[percpu][bpf-stats]") {
  REQUIRE(IsRoot());
  CommandResult before = RunCommand("sysctl -n kernel.bpf_stats_enabled");
  REQUIRE(before.status == 0);
  bool was_on = before.output.rfind("1", 0) == 0;
  if (!was_on) REQUIRE(RunCommand("sysctl -qw kernel.bpf_stats_enabled=1").status == 0);
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 200ms\n"});
  bool serving = kpathd.WaitUntilServing();
  auto root = MemoryCgroupRoot();
  if (root) ChurnCgroups(*root, "kpath-test-stats", 20);
  std::this_thread::sleep_for(600ms);
  auto body = kpathd.Scrape();
  if (!was_on) RunCommand("sysctl -qw kernel.bpf_stats_enabled=0");
  REQUIRE(serving);
  REQUIRE(body);
  CHECK(MetricValue(*body, "kpath_bpf_stats_enabled") == 1);
  CHECK(
      MetricValue(*body, "kpath_bpf_program_runs_total", {{"probe", "percpu_alloc"}}).value_or(0) >=
      20);
  CHECK(MetricValue(*body, "kpath_bpf_program_run_seconds_total", {{"probe", "percpu_alloc"}})
            .value_or(0) > 0);
}

TEST_CASE("callers named from kernel stack samples match the tracepoint's call_site",
          "[percpu][mechanisms]") {
  REQUIRE(IsRoot());
  auto root = MemoryCgroupRoot();
  REQUIRE(root);
  // The path of kernels before 5.19 (no call_site in the tracepoint) and of fentry/kprobe, forced
  // here for each tracepoint mechanism; fentry and kprobe take it always.
  for (std::string mechanism : {"tp_btf", "raw_tp", "tracepoint", "fentry", "kprobe"}) {
    DYNAMIC_SECTION("mechanism " << mechanism) {
      KpathdProcess kpathd(
          {.config_yaml = ConfigRestrictedTo(mechanism) + "percpu:\n  caller_from_stack: true\n"});
      REQUIRE(kpathd.WaitUntilServing());
      if (!AttachedOrLacking(kpathd, kpathd.Scrape().value_or(""), mechanism)) continue;
      REQUIRE(ChurnCgroups(*root, "kpath-test-stack-" + mechanism, 50) == 50);
      std::this_thread::sleep_for(600ms);
      auto body = kpathd.Scrape();
      REQUIRE(body);
      INFO(kpathd.Output());
      CHECK(SumMetric(*body, "kpath_percpu_allocs_total", {{"caller", "mem_cgroup_css_alloc"}}) >=
            50);
      CHECK(SumMetric(*body, "kpath_percpu_allocs_total", {{"caller", "unknown"}}) == 0);
    }
  }
}
