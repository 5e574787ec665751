// A probe that cannot attach at start is retried, for real: kpathd reads tracepoint formats from a
// sysfs tree of the test's (--sysfs-root) in which tlb:tlb_flush is missing at start, as it is
// until the module that defines an event is loaded; the test then puts the kernel's real format
// file there, and the next retry attaches the real BPF program to the real tracepoint.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/kpathd_process.h"
#include "support/temp_dir.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

namespace fs = std::filesystem;

// The host's tracefs event directory for tlb:tlb_flush, if the kernel has it (x86).
std::optional<fs::path> RealTlbFlushEvent() {
  for (const char* tracefs : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    fs::path event = fs::path(tracefs) / "events/tlb/tlb_flush";
    if (fs::exists(event / "format")) return event;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a probe whose tracepoint appears after start is retried and attaches",
          "[daemon][retry]") {
  REQUIRE(IsRoot());
  std::optional<fs::path> real_event = RealTlbFlushEvent();
  if (!real_event) {
    WARN("skipped: no tlb:tlb_flush tracepoint in a mounted tracefs here");
    return;
  }
  TempDir temp;
  fs::path root = temp.path();
  fs::path events = root / "sys/kernel/tracing/events";
  fs::create_directories(events);

  KpathdProcess kpathd({.args = {"--sysfs-root", (root / "sys").string()},
                        .config_yaml =
                            "sampling_interval: 300ms\nhooks:\n  enabled: false\nprobes:\n"
                            "  percpu_alloc: {enabled: false}\n  cgroup_churn: {enabled: false}\n"
                            "  madvise: {enabled: false}\n  irqoff: {enabled: false}\n"
                            "  slabinfo_readers: {enabled: false}\n"
                            "  tlb_flush:\n    mechanisms: [tracepoint]\n"});
  REQUIRE(kpathd.WaitUntilServing());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  INFO(kpathd.Output());
  // Not there yet: reported, with the retry announced.
  CHECK(MetricValue(*body, "kpath_probe_attached",
                    {{"probe", "tlb_flush"}, {"mechanism", "none"}}) == 0);
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "tlb_flush"}}) == 0);
  CHECK_THAT(kpathd.Output(), Catch::Contains("collector tlb_flush: start failed"));
  CHECK_THAT(kpathd.Output(), Catch::Contains("is retried in"));

  // The event appears (as when its module loads): the real format file, in the test's tree.
  fs::create_directories(events / "tlb/tlb_flush");
  // Read and written, not fs::copy_file: tracefs files report size 0, so a size-based copy
  // writes an empty file.
  {
    std::ifstream in(*real_event / "format");
    std::ofstream out(events / "tlb/tlb_flush/format");
    out << in.rdbuf();
  }

  // The first retry comes 5 s after start, then 10 s later, then 20 s, 40 s...: attached at the
  // first retry after the file appeared, within 20 s of start on an idle host. The deadline is
  // for a busy one, where kpathd may serve only after a retry or two have passed.
  bool attached = false;
  for (auto deadline = std::chrono::steady_clock::now() + 180s;
       !attached && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(250ms);
    body = kpathd.Scrape();
    attached = body && MetricValue(*body, "kpath_probe_attached",
                                   {{"probe", "tlb_flush"}, {"mechanism", "tracepoint"}}) == 1;
  }
  INFO("after the retries:\n" << kpathd.Output());
  REQUIRE(attached);
  CHECK_THAT(kpathd.Output(), Catch::Contains("collector tlb_flush: started on attempt"));
  // And it counts: TLB flushes happen all the time on a running host (a context switch between
  // address spaces is one); give it a few samples.
  double flushes = 0;
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       flushes == 0 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(250ms);
    if (auto b = kpathd.Scrape()) {
      body = b;
      flushes = SumMetric(*b, "kpath_tlb_flushes_total");
    }
  }
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "tlb_flush"}}) == 1);
  CHECK(flushes > 0);
}
