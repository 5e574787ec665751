// Probe self-tests on the real kernel: the canary kpathd causes itself reaches the probe's
// programs at start and, one bpf.selftest_interval later, from the sampler with the steady-state
// capabilities.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("self-test: the madvise canary is seen at start and after the capability drop",
          "[madvise][selftest]") {
  REQUIRE(IsRoot());
  // The tracepoint allowed too: where fentry and kprobes do not load, it is madvise's only way.
  KpathdProcess kpathd(
      {.args = {"--log-level", "debug"},
       .config_yaml =
           "sampling_interval: 1s\nbpf:\n  selftest_interval: 3s\nprobes:\n  madvise:\n    "
           "mechanisms: [fentry, kprobe, tracepoint]\n"});
  REQUIRE(kpathd.WaitUntilServing());
  INFO(kpathd.Output());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  REQUIRE(MetricValue(*body, "kpath_probe_attached", {{"probe", "madvise"}}) == 1);
  // The first canary runs with the first collection, before the capabilities are dropped.
  CHECK(MetricValue(*body, "kpath_probe_selftest_success", {{"probe", "madvise"}}) == 1);
  // Probes without a canary export none (tlb_flush: docs/reliability.md, "Probe self-tests").
  CHECK_FALSE(MetricValue(*body, "kpath_probe_selftest_success", {{"probe", "tlb_flush"}}));
  REQUIRE(kpathd.WaitForOutput("capabilities after start"));

  // The next ones one interval apart, on the sampler's thread, with what kpathd keeps.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (Count(kpathd.Output(), "probe madvise: self-test passed") < 3 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(500ms);
  }
  CHECK(Count(kpathd.Output(), "probe madvise: self-test passed") >= 3);
  CHECK(kpathd.Output().find("self-test failed") == std::string::npos);
  body = kpathd.Scrape();
  REQUIRE(body);
  CHECK(MetricValue(*body, "kpath_probe_selftest_success", {{"probe", "madvise"}}) == 1);
}

TEST_CASE("self-test: kpathd's canaries reach the percpu, cgroup and slabinfo probes, uncounted",
          "[selftest][daemon]") {
  REQUIRE(IsRoot());
  // slabinfo_readers' syscall tracepoints are off by default (their cost): allowed here, where
  // the kernel may have no fentry or kprobes.
  KpathdProcess kpathd({.args = {"--log-level", "debug"},
                        .config_yaml = "sampling_interval: 1s\nprobes:\n  slabinfo_readers:\n    "
                                       "mechanisms: [fentry, kprobe, tracepoint]\n"});
  REQUIRE(kpathd.WaitUntilServing());
  INFO(kpathd.Output());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  for (const char* probe : {"percpu_alloc", "cgroup_churn", "slabinfo_readers"}) {
    INFO(probe);
    REQUIRE(MetricValue(*body, "kpath_probe_attached", {{"probe", probe}}) == 1);
    CHECK(MetricValue(*body, "kpath_probe_selftest_success", {{"probe", probe}}) == 1);
  }
  // The canaries are kept out of what the probes count: no cgroup made and no /proc/slabinfo
  // opened by kpathd. (Its per-CPU allocation is one, and counted with kpathd's others.)
  body = kpathd.Scrape();
  REQUIRE(body);
  CHECK(body->find("kpath_cgroup_mkdir_total{comm=\"kpathd\"") == std::string::npos);
  CHECK(body->find("kpath_slabinfo_reads_total{comm=\"kpathd\"") == std::string::npos);
  CHECK(MetricValue(*body, "kpath_cgroup_churn_unlabelled_total") == 0);
  CHECK(kpathd.Output().find("self-test failed") == std::string::npos);
}
