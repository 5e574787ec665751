// Slab cache sizes: the parsers against files captured on Linux 6.18, the sysfs reader against the
// fixture tree, the /proc/slabinfo fallback, and the collector's slow clock and back-off.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fixture_text.h"
#include "probes/slab/slab_collector.h"
#include "probes/slab/slab_files.h"

using namespace kpath;

namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";
const HostPaths kFixturePaths(kFixture / "proc", kFixture / "sys");
const std::vector<std::string> kDefaultCaches = SlabConfig{}.caches;
constexpr uint64_t kPage = 4096;

std::string ReadSlabFixture(const std::string& rel) { return ReadFixture(kFixture / rel); }

auto FarFuture() { return std::chrono::steady_clock::now() + std::chrono::hours(1); }

const SlabCacheSize* Find(const std::vector<SlabCacheSize>& caches, const std::string& name) {
  for (const auto& c : caches) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// A scratch host tree for tests that change files.
struct ScratchTree {
  std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("kpath-slab-test-" + std::to_string(getpid()));
  ScratchTree() {
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root / "proc");
    std::filesystem::create_directories(root / "sys");
  }
  ~ScratchTree() { std::filesystem::remove_all(root); }
  HostPaths paths() const { return HostPaths(root / "proc", root / "sys"); }
  void WriteCache(const std::string& name, uint64_t objects, uint64_t slabs, uint64_t order) {
    std::filesystem::path dir = root / "sys/kernel/slab" / name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "total_objects") << objects << " N0=" << objects << "\n";
    std::ofstream(dir / "slabs") << slabs << " N0=" << slabs << "\n";
    std::ofstream(dir / "order") << order << "\n";
  }
};

}  // namespace

TEST_CASE("SLUB sysfs attributes give their leading total", "[slab][parser]") {
  CHECK(ParseSlabAttribute("53095 N0=53095\n").value() == 53095);
  CHECK(ParseSlabAttribute("1024 N0=512 N1=512\n").value() == 1024);
  CHECK(ParseSlabAttribute("3\n").value() == 3);
  CHECK(ParseSlabAttribute(ReadSlabFixture("sys/kernel/slab/dentry/total_objects")).ok());
  CHECK_FALSE(ParseSlabAttribute("").ok());
  CHECK_FALSE(ParseSlabAttribute("N0=5\n").ok());
  CHECK_FALSE(ParseSlabAttribute("-1\n").ok());
  CHECK_FALSE(ParseSlabAttribute("18446744073709551616\n").ok());
}

TEST_CASE("/proc/slabinfo 2.1 from Linux 6.18 parses into every cache", "[slab][parser]") {
  std::string text = ReadSlabFixture("proc/slabinfo");
  absl::StatusOr<std::vector<SlabinfoEntry>> entries = ParseSlabinfo(text);
  REQUIRE(entries.ok());
  CHECK(entries->size() == 235);  // 237 lines: the version and the header
  auto dentry = std::find_if(entries->begin(), entries->end(),
                             [](const SlabinfoEntry& e) { return e.name == "dentry"; });
  REQUIRE(dentry != entries->end());
  // The fixture's dentry line: as the kernel wrote it.
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && line.rfind("dentry ", 0) != 0) {
  }
  std::istringstream fields(line);
  std::string name;
  uint64_t active, objects, size, per_slab, pages;
  fields >> name >> active >> objects >> size >> per_slab >> pages;
  CHECK(dentry->active_objects == active);
  CHECK(dentry->objects == objects);
  CHECK(dentry->object_size == size);
  CHECK(dentry->objects_per_slab == per_slab);
  CHECK(dentry->pages_per_slab == pages);
}

TEST_CASE("/proc/slabinfo that is not version 2 or has a short line is refused with its line",
          "[slab][parser]") {
  CHECK_FALSE(ParseSlabinfo("").ok());
  CHECK_FALSE(ParseSlabinfo("slabinfo - version: 1.1\n").ok());
  absl::StatusOr<std::vector<SlabinfoEntry>> bad =
      ParseSlabinfo("slabinfo - version: 2.1\n# name ...\ndentry 1 2 3\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("line 3") != std::string::npos);
  CHECK_FALSE(ParseSlabinfo("slabinfo - version: 2.1\n"
                            "dentry x 2 3 4 5 : tunables 0 0 0 : slabdata 1 1 0\n")
                  .ok());
  absl::StatusOr<std::vector<SlabinfoEntry>> empty = ParseSlabinfo("slabinfo - version: 2.1\n");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("sysfs gives the listed caches by name and the largest others, merged ones once",
          "[slab][sysfs]") {
  absl::StatusOr<SlabReading> reading =
      ReadSlabSysfs(kFixturePaths, kDefaultCaches, 10, kPage, FarFuture());
  REQUIRE(reading.ok());
  CHECK(reading->source == SlabSource::kSysfs);
  // All six defaults exist on 6.18; buffer_head is an alias of the merged :a-0000104.
  REQUIRE(reading->listed.size() == 6);
  CHECK(reading->listed[0].name == "dentry");
  CHECK(reading->listed[4].name == "buffer_head");
  const SlabCacheSize* dentry = Find(reading->listed, "dentry");
  REQUIRE(dentry);
  uint64_t objects =
      ParseSlabAttribute(ReadSlabFixture("sys/kernel/slab/dentry/total_objects")).value();
  uint64_t slabs = ParseSlabAttribute(ReadSlabFixture("sys/kernel/slab/dentry/slabs")).value();
  uint64_t order = ParseSlabAttribute(ReadSlabFixture("sys/kernel/slab/dentry/order")).value();
  CHECK(dentry->objects == objects);
  CHECK(dentry->bytes == slabs * (kPage << order));

  REQUIRE(reading->top.size() == 10);
  for (size_t i = 1; i < reading->top.size(); ++i) {
    CHECK(reading->top[i - 1].objects >= reading->top[i].objects);
  }
  for (const SlabCacheSize& c : reading->top) {
    INFO(c.name);
    // Listed caches (and the merged cache behind buffer_head) are not repeated.
    CHECK(Find(reading->listed, c.name) == nullptr);
    CHECK(c.name != ":a-0000104");
    CHECK(c.name != "ext4_fc_dentry_update");
    // A merged cache is named after its first alias, never by its sysfs id.
    CHECK(c.name[0] != ':');
  }
}

TEST_CASE("without /sys/kernel/slab the reader says so, and slabinfo gives the same picture",
          "[slab][slabinfo]") {
  ScratchTree tree;
  absl::StatusOr<SlabReading> none =
      ReadSlabSysfs(tree.paths(), kDefaultCaches, 10, kPage, FarFuture());
  CHECK(absl::IsNotFound(none.status()));

  absl::StatusOr<std::vector<SlabinfoEntry>> entries =
      ParseSlabinfo(ReadSlabFixture("proc/slabinfo"));
  REQUIRE(entries.ok());
  SlabReading reading = SlabReadingFromSlabinfo(*entries, {"dentry", "no_such_cache"}, 3, kPage);
  CHECK(reading.source == SlabSource::kSlabinfo);
  REQUIRE(reading.listed.size() == 1);
  CHECK(reading.listed[0].name == "dentry");
  REQUIRE(reading.top.size() == 3);
  CHECK(reading.top[0].objects >= reading.top[1].objects);
  for (const SlabCacheSize& c : reading.top) CHECK(c.name != "dentry");
}

TEST_CASE("a sysfs read past its deadline is abandoned", "[slab][sysfs]") {
  absl::StatusOr<SlabReading> late =
      ReadSlabSysfs(kFixturePaths, kDefaultCaches, 10, kPage,
                    std::chrono::steady_clock::now() - std::chrono::seconds(1));
  CHECK(absl::IsDeadlineExceeded(late.status()));
}

TEST_CASE("the collector reads on its own slow clock and serves the last reading between",
          "[slab][collector]") {
  ScratchTree tree;
  tree.WriteCache("dentry", 100, 2, 0);
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  SlabConfig config;
  config.caches = {"dentry"};
  config.top_n = 0;
  config.interval = absl::Seconds(60);
  SlabCollector collector(tree.paths(), config, [&] { return now; });
  auto objects = [&] {
    MetricFamilies out;
    REQUIRE(collector.Collect(out).ok());
    for (const auto& f : out) {
      if (f.name == "kpath_slab_objects") return f.metric.at(0).gauge.value;
    }
    FAIL("no kpath_slab_objects");
    return -1.0;
  };
  CHECK(objects() == 100);
  tree.WriteCache("dentry", 200, 4, 0);
  now += std::chrono::seconds(5);
  CHECK(objects() == 100);  // not due: the last reading
  now += std::chrono::seconds(56);
  CHECK(objects() == 200);
}

TEST_CASE("slow reads back off to 64 x the interval and fast ones come back", "[slab][collector]") {
  ScratchTree tree;
  tree.WriteCache("dentry", 100, 2, 0);
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  SlabConfig config;
  config.caches = {"dentry"};
  config.top_n = 0;
  config.interval = absl::Seconds(60);
  config.max_read_time = absl::Nanoseconds(1);  // every read is slow (and abandoned)
  SlabCollector collector(tree.paths(), config, [&] { return now; });
  MetricFamilies out;
  for (int i = 0; i < 8; ++i) {
    CHECK_FALSE(collector.Collect(out).ok());
    now += std::chrono::hours(2);
  }
  CHECK(collector.backoff() == SlabCollector::kMaxBackoff);

  config.max_read_time = absl::Seconds(10);  // reads are fast again: halve per read
  collector.SetConfig(config);
  out.clear();
  REQUIRE(collector.Collect(out).ok());
  double interval = -1;
  for (const auto& f : out) {
    if (f.name == "kpath_slab_read_interval_seconds") interval = f.metric.at(0).gauge.value;
  }
  CHECK(interval == 60.0 * SlabCollector::kMaxBackoff / 2);
  for (int i = 0; i < 5; ++i) {
    now += std::chrono::hours(2);
    out.clear();
    REQUIRE(collector.Collect(out).ok());
  }
  CHECK(collector.backoff() == 1);
}

TEST_CASE("with neither sysfs nor slabinfo the collector fails and says why", "[slab][collector]") {
  ScratchTree tree;
  SlabCollector collector(tree.paths(), SlabConfig{});
  MetricFamilies out;
  absl::Status s = collector.Collect(out);
  CHECK_FALSE(s.ok());
  CHECK(std::string(s.message()).find("slabinfo") != std::string::npos);
}

TEST_CASE("the collector falls back to /proc/slabinfo where SLUB has no sysfs",
          "[slab][collector]") {
  ScratchTree tree;
  std::filesystem::copy_file(kFixture / "proc/slabinfo", tree.root / "proc/slabinfo");
  SlabCollector collector(tree.paths(), SlabConfig{});
  MetricFamilies out;
  REQUIRE(collector.Collect(out).ok());
  bool saw_source = false;
  for (const auto& f : out) {
    if (f.name != "kpath_slab_read_duration_seconds") continue;
    REQUIRE(f.metric.size() == 1);
    CHECK(f.metric[0].label.at(0).value == "slabinfo");
    saw_source = true;
  }
  CHECK(saw_source);
}
