// Golden /metrics: kpathd on a fixture tree with BPF off, its exposition diffed against a
// checked-in file, as node_exporter's end-to-end test does. KPATH_UPDATE_GOLDEN=1 rewrites the
// golden file instead of comparing.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/kpathd_process.h"

using namespace kpath::testing;

namespace {

// Drops what differs between runs and hosts: timings, the build and kernel, civetweb's own
// exposer_* metrics, kpathd's own process_* metrics; masks the time of the collection.
std::string Stable(const std::string& exposition) {
  std::istringstream in(exposition);
  std::ostringstream out;
  std::string line;
  for (std::string line; std::getline(in, line);) {
    auto volatile_metric = [&](const std::string& name) {
      return line.find(" " + name + " ") != std::string::npos || line.rfind(name, 0) == 0;
    };
    if (volatile_metric("kpath_collector_duration_seconds") ||
        volatile_metric("kpath_slab_read_duration_seconds") ||
        volatile_metric("kpath_build_info") || volatile_metric("kpath_bpf_stats_enabled") ||
        line.find("exposer_") != std::string::npos ||
        // kpathd's own process (its CPU, memory, fds): the fixture tree does not stand in for it.
        line.find("process_") != std::string::npos) {
      continue;
    }
    // The family stays in the golden file; its value (a time) does not.
    if (line.rfind("kpath_last_sample_timestamp_seconds ", 0) == 0) {
      line = "kpath_last_sample_timestamp_seconds <time of the collection>";
    }
    out << line << "\n";
  }
  return out.str();
}

}  // namespace

TEST_CASE("golden: /metrics from the linux-6.18.44 fixture tree", "[golden]") {
  std::string root = std::string(KPATH_FIXTURES) + "/linux-6.18.44-x86_64";
  KpathdProcess kpathd({.args = {"--procfs-root", root + "/proc", "--sysfs-root", root + "/sys"},
                        // One collection only: the growth rate needs a second sample, so it is
                        // absent here and the output is stable.
                        .config_yaml =
                            "sampling_interval: 1h\nmeminfo:\n  percpu_growth_window: 2h\n"
                            "bpf:\n  enabled: false\n"});
  REQUIRE(kpathd.WaitUntilServing());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  std::string actual = Stable(*body);
  std::string golden_path =
      std::string(KPATH_SOURCE_DIR) + "/tests/golden/linux-6.18.44-x86_64.metrics";
  if (const char* update = std::getenv("KPATH_UPDATE_GOLDEN");
      update && std::string(update) == "1") {
    std::ofstream(golden_path) << actual;
    WARN("rewrote " << golden_path);
    return;
  }
  std::ifstream in(golden_path);
  REQUIRE(in.good());
  std::stringstream expected;
  expected << in.rdbuf();
  if (actual != expected.str()) {
    std::ofstream("/tmp/kpath-golden-actual.metrics") << actual;
    CommandResult diff = RunCommand("diff -u " + golden_path + " /tmp/kpath-golden-actual.metrics");
    FAIL("output differs from " << golden_path << " (KPATH_UPDATE_GOLDEN=1 to accept):\n"
                                << diff.output);
  }
  CommandResult lint = RunCommand("promtool check metrics", *body);
  INFO(lint.output);
  CHECK(lint.status == 0);
}
