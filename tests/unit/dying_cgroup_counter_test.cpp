#include "probes/cgroups/dying_cgroup_counter.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "probes/kernel/host_paths.h"

namespace kpath {
namespace {

namespace fs = std::filesystem;
const fs::path kLinux618 = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

HostPaths RootedAt(const fs::path& root) { return HostPaths(root / "proc", root / "sys"); }

// kpath_cgroups by (controller, state), from one collection.
std::map<std::pair<std::string, std::string>, double> Collect(DyingCgroupCounter& counter) {
  MetricFamilies families;
  absl::Status status = counter.Collect(families);
  INFO(std::string(status.message()));
  REQUIRE(status.ok());
  REQUIRE(families.size() == 1);
  REQUIRE(families[0].name == "kpath_cgroups");
  std::map<std::pair<std::string, std::string>, double> values;
  for (const auto& metric : families[0].metric) {
    std::string controller, state;
    for (const auto& label : metric.label) {
      if (label.name == "controller") controller = label.value;
      if (label.name == "state") state = label.value;
    }
    values[{controller, state}] = metric.gauge.value;
  }
  return values;
}

// A scratch host tree under /tmp, removed at the end of the test.
class ScratchTree {
 public:
  ScratchTree() {
    root_ = fs::temp_directory_path() / ("kpath-cgroups-test-" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~ScratchTree() { fs::remove_all(root_); }
  const fs::path& root() const { return root_; }
  void Write(const fs::path& rel, const std::string& text) const {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  void Mkdir(const fs::path& rel) const { fs::create_directories(root_ / rel); }

 private:
  fs::path root_;
};

TEST_CASE("the hybrid 6.18 fixture gives live and dying cgroups for v1 and v2 controllers",
          "[cgroups][dying]") {
  DyingCgroupCounter counter(RootedAt(kLinux618));
  auto values = Collect(counter);
  // v1 memory: num_cgroups 52 in /proc/cgroups, 4 directories (the root, a slice, 2 children).
  CHECK(values[{"memory", "live"}] == 4);
  CHECK(values[{"memory", "dying"}] == 48);
  CHECK(values[{"cpu", "live"}] == 1);
  CHECK(values[{"cpu", "dying"}] == 0);
  CHECK(values[{"pids", "live"}] == 1);
  // v2 controllers from cgroup.stat's nr_subsys_* (6.11+).
  CHECK(values[{"hugetlb", "live"}] == 1);
  CHECK(values[{"perf_event", "dying"}] == 0);
  CHECK(values[{"cgroup2", "live"}] == 1);
  CHECK(values[{"cgroup2", "dying"}] == 0);
  // net_cls and net_prio have no css on v2 and no v1 mount here: not reported.
  CHECK(values.count({"net_cls", "live"}) == 0);
  CHECK(values.size() == 2 * 11);  // 8 v1 controllers, 2 v2 ones, the v2 hierarchy
}

TEST_CASE("pure cgroup v2 before 6.11 reports the hierarchy's counts for enabled controllers",
          "[cgroups][dying]") {
  ScratchTree host;
  host.Write("proc/self/mountinfo",
             "35 25 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n");
  host.Write("proc/cgroups",
             "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
             "cpu\t0\t5071\t1\nmemory\t0\t5071\t1\npids\t0\t5071\t1\nrdma\t0\t5071\t1\n");
  host.Write("sys/fs/cgroup/cgroup.stat", "nr_descendants 70\nnr_dying_descendants 5000\n");
  host.Write("sys/fs/cgroup/cgroup.subtree_control", "cpu memory pids\n");
  DyingCgroupCounter counter(RootedAt(host.root()));
  auto values = Collect(counter);
  CHECK(values[{"cgroup2", "live"}] == 71);
  CHECK(values[{"cgroup2", "dying"}] == 5000);
  CHECK(values[{"memory", "live"}] == 71);
  CHECK(values[{"memory", "dying"}] == 5000);
  CHECK(values[{"pids", "dying"}] == 5000);
  CHECK(values.count({"rdma", "live"}) == 0);  // not enabled below the root
}

TEST_CASE("pure cgroup v2 without /proc/cgroups uses the controllers cgroup.stat names",
          "[cgroups][dying]") {
  ScratchTree host;
  host.Write("proc/self/mountinfo", "35 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  host.Write("sys/fs/cgroup/cgroup.stat",
             "nr_descendants 70\nnr_subsys_memory 60\nnr_dying_descendants 7\n"
             "nr_dying_subsys_memory 6\n");
  DyingCgroupCounter counter(RootedAt(host.root()));
  auto values = Collect(counter);
  CHECK(values[{"memory", "live"}] == 60);
  CHECK(values[{"memory", "dying"}] == 6);
  CHECK(values[{"cgroup2", "dying"}] == 7);
}

TEST_CASE("a v1 hierarchy mounted only as a subtree is not counted", "[cgroups][dying]") {
  ScratchTree host;
  host.Write("proc/self/mountinfo",
             "32 31 0:29 /kubepods/pod1 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
             "33 31 0:30 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n");
  host.Write("proc/cgroups",
             "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
             "memory\t4\t900\t1\npids\t8\t5\t1\n");
  host.Mkdir("sys/fs/cgroup/memory/a");
  host.Write("sys/fs/cgroup/pids/cgroup.sane_behavior", "0\n");
  host.Mkdir("sys/fs/cgroup/pids/a/b");
  host.Mkdir("sys/fs/cgroup/pids/c");
  DyingCgroupCounter counter(RootedAt(host.root()));
  auto values = Collect(counter);
  CHECK(values.count({"memory", "dying"}) == 0);
  CHECK(values[{"pids", "live"}] == 4);
  CHECK(values[{"pids", "dying"}] == 1);
}

// Mountinfo lines and layouts as this host's kernel (6.18, hybrid) showed them in a process of
// `unshare --cgroup` whose memory cgroup was /process_api/<id>/kx: its own fresh mount of the
// hierarchy reads root "/" (the namespace's root, a subtree), and the host's whole hierarchy,
// mounted before the unshare, "/../../..". Only the real root holds cgroup.sane_behavior.
TEST_CASE("in a cgroup namespace on a v1 host, the namespace's own mount is not counted",
          "[cgroups][dying]") {
  ScratchTree host;
  // The container's own mount at /sys/fs/cgroup/memory: 6 directories of a pod's subtree, while
  // the hierarchy has 133 cgroups, 5 of them dying. Read as the whole, 127 would be dying.
  host.Write("proc/self/mountinfo",
             "65 45 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n");
  host.Write("proc/cgroups", "memory 4 133 1\n");
  for (const char* dir : {"a/b", "a/c", "d/e"}) host.Mkdir(fs::path("sys/fs/cgroup/memory") / dir);
  DyingCgroupCounter counter(RootedAt(host.root()));
  MetricFamilies families;
  CHECK_FALSE(counter.Collect(families).ok());  // no hierarchy it can count: no figure at all
  CHECK(families.empty());
}

TEST_CASE("in a cgroup namespace, the host's hierarchy mounted in whole is counted",
          "[cgroups][dying]") {
  // As deploy/kubernetes/daemonset.yaml mounts it: the host's /sys/fs/cgroup, alone or over the
  // runtime's own cgroup mount, which then stays listed first, hidden under it.
  const std::string host_mounts =
      "53 49 0:31 /../../.. /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "54 49 0:37 /../.. /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  const std::string hidden = "65 45 0:31 / /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n";
  for (const std::string& mountinfo : {host_mounts, hidden + host_mounts}) {
    INFO(mountinfo);
    ScratchTree host;
    host.Write("proc/self/mountinfo", mountinfo);
    host.Write("proc/cgroups", "memory 4 133 1\n");
    host.Write("sys/fs/cgroup/memory/cgroup.sane_behavior", "0\n");
    for (const char* dir : {"a/b", "a/c", "d/e"}) {
      host.Mkdir(fs::path("sys/fs/cgroup/memory") / dir);
    }
    host.Write("sys/fs/cgroup/unified/cgroup.stat", "nr_descendants 5\nnr_dying_descendants 2\n");
    DyingCgroupCounter counter(RootedAt(host.root()));
    auto values = Collect(counter);
    CHECK(values[{"memory", "live"}] == 6);
    CHECK(values[{"memory", "dying"}] == 127);
    CHECK(values[{"cgroup2", "live"}] == 6);
    CHECK(values[{"cgroup2", "dying"}] == 2);
  }
}

TEST_CASE("a cgroup v2 subtree, even one mountinfo shows as \"/\", is not counted",
          "[cgroups][dying]") {
  ScratchTree host;
  host.Write("proc/self/mountinfo", "35 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  host.Write("sys/fs/cgroup/cgroup.stat", "nr_descendants 0\nnr_dying_descendants 0\n");
  host.Write("sys/fs/cgroup/cgroup.events", "populated 1\nfrozen 0\n");  // never at the root
  host.Write("sys/fs/cgroup/cgroup.type", "domain\n");
  DyingCgroupCounter counter(RootedAt(host.root()));
  MetricFamilies families;
  CHECK_FALSE(counter.Collect(families).ok());
  CHECK(families.empty());
}

TEST_CASE("dying is never negative when directories outnumber num_cgroups", "[cgroups][dying]") {
  ScratchTree host;
  host.Write("proc/self/mountinfo",
             "33 31 0:30 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n");
  host.Write("proc/cgroups", "pids 8 1 1\n");  // read before a mkdir the walk then saw
  host.Write("sys/fs/cgroup/pids/cgroup.sane_behavior", "0\n");
  host.Mkdir("sys/fs/cgroup/pids/a");
  DyingCgroupCounter counter(RootedAt(host.root()));
  auto values = Collect(counter);
  CHECK(values[{"pids", "live"}] == 2);
  CHECK(values[{"pids", "dying"}] == 0);
}

TEST_CASE("a host without any cgroup mount fails the collection", "[cgroups][dying]") {
  ScratchTree host;
  host.Write("proc/self/mountinfo", "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n");
  DyingCgroupCounter counter(RootedAt(host.root()));
  MetricFamilies families;
  CHECK_FALSE(counter.Collect(families).ok());
}

TEST_CASE("directories are counted at every depth, leaves unopened", "[cgroups][dying]") {
  ScratchTree host;
  for (const char* dir : {"h/a/b/c/d", "h/a/b/e", "h/f", "h/g/h/i"}) host.Mkdir(dir);
  host.Write("h/a/not-a-dir", "");
  fs::create_directory_symlink(host.root() / "h/a", host.root() / "h/link");  // not followed
  absl::StatusOr<uint64_t> n = CountCgroupDirectories(host.root() / "h");
  REQUIRE(n.ok());
  CHECK(*n == 10);  // h a b c d e f g h i
  CHECK_FALSE(CountCgroupDirectories(host.root() / "missing").ok());
}

TEST_CASE("mount points under /sys follow the sysfs root", "[cgroups][dying]") {
  HostPaths paths("/host/proc", "/host/sys");
  CHECK(HostPathOfMount(paths, "/sys/fs/cgroup/memory") == "/host/sys/fs/cgroup/memory");
  CHECK(HostPathOfMount(paths, "/sys") == "/host/sys");
  CHECK(HostPathOfMount(paths, "/cgroup/memory") == "/cgroup/memory");
}

}  // namespace
}  // namespace kpath
