#include "probes/procfs/self_process.h"
#include "fixture_text.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "probes/collect/metric_families.h"
#include "probes/kernel/host_paths.h"

namespace kpath {
namespace {

namespace fs = std::filesystem;

const fs::path kLinux618 = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

double Value(const MetricFamilies& families, std::string_view name) {
  for (const auto& f : families) {
    if (f.name != name) continue;
    REQUIRE(f.metric.size() == 1);
    const auto& m = f.metric[0];
    return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
  }
  FAIL("no family " << name);
  return 0;
}

TEST_CASE("ParseProcPidStat reads kpathd's real /proc/PID/stat (6.18)", "[self]") {
  absl::StatusOr<ProcPidStat> stat = ParseProcPidStat(ReadFixture(kLinux618 / "proc/self/stat"));
  REQUIRE(stat.ok());
  CHECK(stat->utime_ticks == 9);
  CHECK(stat->stime_ticks == 23);
  CHECK(stat->num_threads == 132);
  CHECK(stat->start_time_ticks == 1249270);
  CHECK(stat->vsize_bytes == 1126641664);
  CHECK(stat->rss_pages == 14128);
}

TEST_CASE("a comm with spaces and parentheses does not shift the fields", "[self]") {
  // The real line with its comm replaced by one a process can set (prctl PR_SET_NAME).
  std::string text = ReadFixture(kLinux618 / "proc/self/stat");
  text.replace(text.find("(kpathd)"), 8, "(a) (b c))");
  absl::StatusOr<ProcPidStat> stat = ParseProcPidStat(text);
  REQUIRE(stat.ok());
  CHECK(stat->utime_ticks == 9);
  CHECK(stat->rss_pages == 14128);
}

TEST_CASE("a garbled or cut /proc/PID/stat is an error naming the field", "[self]") {
  CHECK_FALSE(ParseProcPidStat("").ok());
  CHECK_FALSE(ParseProcPidStat("1234 kpathd S 1").ok());
  absl::StatusOr<ProcPidStat> cut = ParseProcPidStat("30031 (kpathd) S 1 30028 16027 0 -1");
  REQUIRE_FALSE(cut.ok());
  CHECK(std::string(cut.status().message()) == "field 14 (utime) is not a number: \"\"");
  std::string text = ReadFixture(kLinux618 / "proc/self/stat");
  text.replace(text.find(" 14128 "), 7, " 14x28 ");
  absl::StatusOr<ProcPidStat> bad = ParseProcPidStat(text);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) == "field 24 (rss) is not a number: \"14x28\"");
}

TEST_CASE("the open-files limit comes from the real limits file", "[self]") {
  CHECK(ParseMaxOpenFiles(ReadFixture(kLinux618 / "proc/self/limits")) == 20000u);
  CHECK(ParseMaxOpenFiles("Max open files            unlimited            unlimited  files\n") ==
        std::nullopt);
  CHECK(ParseMaxOpenFiles("") == std::nullopt);
}

TEST_CASE("the collector exports the process_* metrics of the fixture process", "[self]") {
  // A copy of the fixture's self directory with an fd directory of three entries.
  fs::path dir = fs::temp_directory_path() / ("kpath-self-test-" + std::to_string(getpid()));
  fs::create_directories(dir / "fd");
  fs::copy_file(kLinux618 / "proc/self/stat", dir / "stat");
  fs::copy_file(kLinux618 / "proc/self/limits", dir / "limits");
  for (const char* fd : {"0", "1", "2"}) std::ofstream(dir / "fd" / fd) << "";
  SelfProcessCollector collector(dir, kLinux618 / "proc/stat", 100, 4096);
  MetricFamilies out;
  REQUIRE(collector.Collect(out).ok());
  fs::remove_all(dir);
  CHECK(Value(out, "process_cpu_seconds_total") == Approx(0.32));
  CHECK(Value(out, "process_resident_memory_bytes") == 14128.0 * 4096);
  CHECK(Value(out, "process_virtual_memory_bytes") == 1126641664.0);
  CHECK(Value(out, "process_threads") == 132);
  CHECK(Value(out, "process_open_fds") == 3);
  CHECK(Value(out, "process_max_fds") == 20000);
  // btime of the fixture's /proc/stat plus the start time's 1249270 ticks.
  CHECK(Value(out, "process_start_time_seconds") == Approx(1796023348.0 + 12492.70));
}

TEST_CASE("a missing /proc/self fails the collection with the path", "[self]") {
  SelfProcessCollector collector("/nonexistent/self", "/nonexistent/stat", 100, 4096);
  MetricFamilies out;
  absl::Status s = collector.Collect(out);
  CHECK_FALSE(s.ok());
  CHECK_THAT(std::string(s.message()), Catch::Contains("/nonexistent/self/stat"));
}

}  // namespace
}  // namespace kpath
