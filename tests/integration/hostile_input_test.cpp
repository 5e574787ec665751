// Hostile or broken input through --procfs-root: a FIFO where /proc/meminfo belongs (reading it
// would block forever) and a garbled /proc/stat. Only the collectors of those files fail, each
// with a clear reason; kpathd keeps sampling and serving everything else.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/kpathd_process.h"
#include "support/temp_dir.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

TEST_CASE("a FIFO and a garbled file in the procfs tree fail only their own collectors",
          "[daemon][hostile]") {
  namespace fs = std::filesystem;
  fs::path fixture = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";
  TempDir temp;
  fs::path root = fs::path(temp.path()) / "tree";
  fs::copy(fixture, root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::remove(root / "proc/meminfo");
  REQUIRE(::mkfifo((root / "proc/meminfo").c_str(), 0600) == 0);
  {
    std::ofstream stat(root / "proc/stat", std::ios::trunc);
    stat << "cpu  garbage\nthis is not /proc/stat\n";
  }
  KpathdProcess kpathd(
      {.args = {"--procfs-root", (root / "proc").string(), "--sysfs-root", (root / "sys").string()},
       .config_yaml = "sampling_interval: 300ms\nbpf:\n  enabled: false\n"});
  REQUIRE(kpathd.WaitUntilServing());
  std::this_thread::sleep_for(1s);  // a few samples: the loop goes on past the FIFO
  auto body = kpathd.Scrape();
  REQUIRE(body);
  INFO(kpathd.Output());
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "meminfo"}}) == 0);
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "stat"}}) == 0);
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "interrupts"}}) == 1);
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "slab"}}) == 1);
  CHECK(MetricValue(*body, "kpath_slab_objects", {{"cache", "dentry"}}));
  CHECK_THAT(kpathd.Output(), Catch::Contains("meminfo: not a regular file"));
  CHECK_THAT(kpathd.Output(), Catch::Contains("collector stat: collection failed"));
  // Still sampling: a later scrape is served as quickly.
  CHECK(kpathd.Scrape());
  CHECK(kpathd.Running());
}
