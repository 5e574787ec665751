// Configuration `irqoff:` and `slab:`: defaults, parsing and the errors a typo gets.
#include <catch2/catch.hpp>
#include <string>

#include "config_parse.h"
#include "daemon/config.h"

using namespace kpath;
using Catch::Matchers::Contains;
using kpath::testing::ErrorOf;
using kpath::testing::Parse;

TEST_CASE("irqoff and slab defaults catch seed 001 without a costly read", "[config][irqoff]") {
  const Config config;
  CHECK(config.irqoff.threshold == absl::Milliseconds(10));
  CHECK(config.irqoff.period == absl::Milliseconds(2));
  CHECK(config.irqoff.max_window == absl::Seconds(60));
  CHECK(config.irqoff.ignore_vm_pauses);
  CHECK(config.slab.caches == std::vector<std::string>{"dentry", "inode_cache", "proc_inode_cache",
                                                       "sock_inode_cache", "buffer_head", "filp"});
  CHECK(config.slab.top_n == 10);
  CHECK(config.slab.interval == absl::Seconds(60));
  CHECK(config.slab.max_read_time == absl::Milliseconds(50));
  CHECK(DefaultMechanisms("irqoff") == std::vector<Mechanism>{Mechanism::kTpBtf, Mechanism::kRawTp,
                                                              Mechanism::kTracepoint,
                                                              Mechanism::kPerfEvent});
  CHECK(DefaultMechanisms("slabinfo_readers") ==
        std::vector<Mechanism>{Mechanism::kFentry, Mechanism::kKprobe});
}

TEST_CASE("irqoff and slab settings are read from the file", "[config][irqoff]") {
  Config config = Parse(
      "irqoff:\n  threshold: 4ms\n  period: 500us\n  max_window: 2m\n  ignore_vm_pauses: false\n"
      "slab:\n  caches: [dentry, kmalloc-rcl-64]\n  top_n: 0\n  interval: 5m\n"
      "  max_read_time: 20ms\n"
      "probes:\n  irqoff:\n    mechanisms: [perf_event]\n");
  CHECK(config.irqoff.threshold == absl::Milliseconds(4));
  CHECK(config.irqoff.period == absl::Microseconds(500));
  CHECK(config.irqoff.max_window == absl::Minutes(2));
  CHECK_FALSE(config.irqoff.ignore_vm_pauses);
  CHECK(config.slab.caches == std::vector<std::string>{"dentry", "kmalloc-rcl-64"});
  CHECK(config.slab.top_n == 0);
  CHECK(config.slab.interval == absl::Minutes(5));
  CHECK(config.slab.max_read_time == absl::Milliseconds(20));
  CHECK(config.Probe("irqoff").mechanisms == std::vector<Mechanism>{Mechanism::kPerfEvent});
}

TEST_CASE("a threshold under two periods is an error naming both", "[config][irqoff]") {
  std::string error = ErrorOf("irqoff:\n  period: 6ms\n");
  CHECK_THAT(error, Contains("kpathd.yaml:2"));
  CHECK_THAT(error, Contains("irqoff.threshold (10ms) must be at least 2 x irqoff.period (6ms)"));
  CHECK(Parse("irqoff:\n  period: 5ms\n").irqoff.period == absl::Milliseconds(5));
  CHECK_THAT(ErrorOf("irqoff:\n  threshold: 100us\n"), Contains("irqoff.threshold"));
  CHECK_THAT(ErrorOf("irqoff:\n  period: 1us\n"), Contains("irqoff.period"));
  CHECK_THAT(ErrorOf("irqoff:\n  limit: 3\n"), Contains("unknown key \"limit\""));
}

TEST_CASE("the IRQ-off maximum's window spans 1s to 1h", "[config][irqoff]") {
  CHECK(Parse("irqoff:\n  max_window: 1s\n").irqoff.max_window == absl::Seconds(1));
  CHECK(Parse("irqoff:\n  max_window: 1h\n").irqoff.max_window == absl::Hours(1));
  CHECK_THAT(ErrorOf("irqoff:\n  max_window: 500ms\n"), Contains("irqoff.max_window"));
  CHECK_THAT(ErrorOf("irqoff:\n  max_window: 2h\n"), Contains("irqoff.max_window"));
  CHECK_THAT(ErrorOf("irqoff:\n  max_window: often\n"), Contains("irqoff.max_window"));
  CHECK_THAT(ErrorOf("irqoff:\n  ignore_vm_pauses: sometimes\n"),
             Contains("irqoff.ignore_vm_pauses"));
}

TEST_CASE("slab cache names are plain names, listed once", "[config][slab]") {
  CHECK_THAT(ErrorOf("slab:\n  caches: dentry\n"), Contains("expected a list of slab cache names"));
  CHECK_THAT(ErrorOf("slab:\n  caches: [dentry, dentry]\n"), Contains("listed more than once"));
  CHECK_THAT(ErrorOf("slab:\n  caches: [../../etc]\n"), Contains("expected a slab cache name"));
  CHECK_THAT(ErrorOf("slab:\n  caches: [\"a b\"]\n"), Contains("expected a slab cache name"));
  CHECK(Parse("slab:\n  caches: []\n").slab.caches.empty());
  CHECK_THAT(ErrorOf("slab:\n  top_n: -1\n"), Contains("slab.top_n"));
  CHECK_THAT(ErrorOf("slab:\n  interval: 10ms\n"), Contains("slab.interval"));
  CHECK_THAT(ErrorOf("slab:\n  max_read_time: 1m\n"), Contains("slab.max_read_time"));
}
