#include "probes/procfs/stat.h"
#include "fixture_text.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>

#include "probes/collect/metric_families.h"
#include "probes/kernel/host_paths.h"
#include "probes/procfs/stat_collector.h"

namespace kpath {
namespace {

namespace fs = std::filesystem;

const fs::path kLinux618 = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

TEST_CASE("ParseProcStat reads the real 6.18 file: 10 CPU modes, per-CPU lines, scalars",
          "[stat]") {
  absl::StatusOr<ProcStat> stat = ParseProcStat(ReadFixture(kLinux618 / "proc/stat"));
  REQUIRE(stat.ok());
  CHECK(stat->total.cpu == "cpu");
  CHECK(stat->total.modes == 10);
  REQUIRE(stat->per_cpu.size() == 2);
  CHECK(stat->per_cpu[0].cpu == "cpu0");
  CHECK(stat->per_cpu[1].cpu == "cpu1");
  // The aggregate is the sum of the CPUs for every mode, give or take one tick per CPU: the
  // kernel converts each sum from nanoseconds separately, rounding down.
  for (size_t m = 0; m < kCpuModes.size(); ++m) {
    INFO(kCpuModes[m]);
    uint64_t sum = stat->per_cpu[0].ticks[m] + stat->per_cpu[1].ticks[m];
    CHECK(stat->total.ticks[m] >= sum);
    CHECK(stat->total.ticks[m] <= sum + 2);
  }
  // The fixture's first line: "cpu  74411 0 12170 232043 478 0 88 23 0 0".
  CHECK(stat->total.ticks[0] == 74411);   // user
  CHECK(stat->total.ticks[2] == 12170);   // system
  CHECK(stat->total.ticks[3] == 232043);  // idle
  CHECK(stat->total.ticks[7] == 23);      // steal
  CHECK(stat->context_switches == 798824);
  CHECK(stat->boot_time == 1796023348);
  CHECK(stat->forks == 22115);
  CHECK(stat->procs_running == 2);
  CHECK(stat->procs_blocked == 0);
}

TEST_CASE("ParseProcStat accepts an old kernel's 8 columns and a future kernel's 11", "[stat]") {
  absl::StatusOr<ProcStat> old_kernel = ParseProcStat("cpu  10 20 30 40 50 60 70 80\n");
  REQUIRE(old_kernel.ok());
  CHECK(old_kernel->total.modes == 8);
  CHECK(old_kernel->total.ticks[7] == 80);
  CHECK(old_kernel->total.ticks[8] == 0);
  absl::StatusOr<ProcStat> future = ParseProcStat("cpu  1 2 3 4 5 6 7 8 9 10 11\n");
  REQUIRE(future.ok());
  CHECK(future->total.modes == 10);
  CHECK(future->total.ticks[9] == 10);
}

TEST_CASE("ParseProcStat rejects garbled text with the line number", "[stat]") {
  CHECK(ParseProcStat("").status().message() == "/proc/stat: no aggregate \"cpu\" line");
  CHECK(ParseProcStat("cpu0 1 2 3 4\n").status().message() ==
        "/proc/stat: no aggregate \"cpu\" line");
  absl::Status short_line = ParseProcStat("ctxt 5\ncpu  1 2 3\n").status();
  CHECK(short_line.message().find("line 2") != absl::string_view::npos);
  CHECK(short_line.message().find("fewer than 4") != absl::string_view::npos);
  CHECK_FALSE(ParseProcStat("cpu  1 2 -3 4\n").ok());
  CHECK_FALSE(ParseProcStat("cpu  1 2 3 99999999999999999999999\n").ok());
  CHECK_FALSE(ParseProcStat("cpu  1 2 3 4\ncpu  1 2 3 4\n").ok());
  CHECK_FALSE(ParseProcStat("cpu  1 2 3 4\nctxt abc\n").ok());
}

TEST_CASE("StatCollector exports kpath_cpu_seconds_total by mode in seconds", "[stat]") {
  StatCollector collector(HostPaths(kLinux618 / "proc", kLinux618 / "sys"), 100);
  MetricFamilies out;
  REQUIRE(collector.Collect(out).ok());
  REQUIRE(out.size() == 1);
  CHECK(out[0].name == "kpath_cpu_seconds_total");
  CHECK(out[0].type == prometheus::MetricType::Counter);
  std::map<std::string, double> by_mode;
  for (const auto& m : out[0].metric) {
    REQUIRE(m.label.size() == 1);
    CHECK(m.label[0].name == "mode");
    by_mode[m.label[0].value] = m.counter.value;
  }
  CHECK(by_mode.size() == 10);
  CHECK(by_mode["user"] == Approx(744.11));
  CHECK(by_mode["system"] == Approx(121.70));
  CHECK(by_mode["idle"] == Approx(2320.43));
  CHECK(by_mode["guest_nice"] == 0);
}

TEST_CASE("StatCollector fails on a missing file, naming it", "[stat]") {
  StatCollector collector(HostPaths("/nonexistent/proc", "/nonexistent/sys"), 100);
  MetricFamilies out;
  absl::Status s = collector.Collect(out);
  CHECK_FALSE(s.ok());
  CHECK(s.message().find("/nonexistent/proc/stat") != absl::string_view::npos);
}

}  // namespace
}  // namespace kpath
