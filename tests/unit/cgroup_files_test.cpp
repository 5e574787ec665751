#include "probes/cgroups/cgroup_files.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "probes/kernel/host_paths.h"

namespace kpath {
namespace {

namespace fs = std::filesystem;
const fs::path kLinux618 = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

std::string Fixture(const fs::path& rel) {
  absl::StatusOr<std::string> text = ReadFileToString(kLinux618 / rel);
  REQUIRE(text.ok());
  return *text;
}

const CgroupController* Find(const std::vector<CgroupController>& all, std::string_view name) {
  for (const CgroupController& c : all)
    if (c.name == name) return &c;
  return nullptr;
}

TEST_CASE("/proc/cgroups of the hybrid 6.18 machine parses every controller", "[cgroups][files]") {
  absl::StatusOr<std::vector<CgroupController>> all = ParseProcCgroups(Fixture("proc/cgroups"));
  REQUIRE(all.ok());
  CHECK(all->size() == 12);
  const CgroupController* memory = Find(*all, "memory");
  REQUIRE(memory);
  CHECK(memory->hierarchy == 4);
  CHECK(memory->num_cgroups == 52);
  CHECK(memory->enabled);
  const CgroupController* hugetlb = Find(*all, "hugetlb");
  REQUIRE(hugetlb);
  CHECK(hugetlb->hierarchy == 0);  // bound to the v2 hierarchy here
}

TEST_CASE("/proc/cgroups columns are found by the header's names", "[cgroups][files]") {
  // A pure cgroup v2 host (every controller on hierarchy 0), columns reordered.
  absl::StatusOr<std::vector<CgroupController>> all = ParseProcCgroups(
      "#subsys_name\tenabled\tnum_cgroups\n"
      "cpu\t1\t73\n"
      "memory\t0\t5073\n");
  REQUIRE(all.ok());
  REQUIRE(all->size() == 2);
  CHECK((*all)[1].name == "memory");
  CHECK((*all)[1].num_cgroups == 5073);
  CHECK_FALSE((*all)[1].enabled);
  CHECK((*all)[1].hierarchy == 0);
}

TEST_CASE("/proc/cgroups without a header is read as the classic four columns",
          "[cgroups][files]") {
  absl::StatusOr<std::vector<CgroupController>> all = ParseProcCgroups("memory 4 18 1\n");
  REQUIRE(all.ok());
  CHECK((*all)[0].num_cgroups == 18);
}

TEST_CASE("a garbled /proc/cgroups is an error naming the line", "[cgroups][files]") {
  absl::StatusOr<std::vector<CgroupController>> bad =
      ParseProcCgroups("#subsys_name\thierarchy\tnum_cgroups\tenabled\nmemory\t4\tmany\t1\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("line 2") != std::string::npos);
  CHECK_FALSE(ParseProcCgroups("memory 4\n").ok());
  CHECK_FALSE(ParseProcCgroups("").ok());
  CHECK_FALSE(ParseProcCgroups("#hierarchy num\n").ok());
}

TEST_CASE("cgroup.stat of 6.18 has per-controller live and dying counts", "[cgroups][files]") {
  absl::StatusOr<CgroupStat> stat = ParseCgroupStat(Fixture("sys/fs/cgroup/unified/cgroup.stat"));
  REQUIRE(stat.ok());
  CHECK(stat->Get("nr_descendants") == 0u);
  CHECK(stat->Get("nr_dying_descendants") == 0u);
  CHECK(stat->Get("nr_subsys_hugetlb") == 1u);
  CHECK(stat->Get("nr_dying_subsys_perf_event") == 0u);
  CHECK_FALSE(stat->Get("nr_subsys_memory"));
}

TEST_CASE("cgroup.stat before 6.11 has only the hierarchy's counts", "[cgroups][files]") {
  absl::StatusOr<CgroupStat> stat =
      ParseCgroupStat("nr_descendants 70\nnr_dying_descendants 5000\n");
  REQUIRE(stat.ok());
  CHECK(stat->Get("nr_dying_descendants") == 5000u);
  CHECK_FALSE(ParseCgroupStat("nr_descendants seventy\n").ok());
  CHECK_FALSE(ParseCgroupStat("nr_dying_descendants 1\n").ok());  // not a cgroup.stat
}

TEST_CASE("mountinfo of the hybrid machine lists v1 controllers and the v2 mount",
          "[cgroups][files]") {
  absl::StatusOr<std::vector<CgroupMount>> mounts =
      ParseCgroupMounts(Fixture("proc/self/mountinfo"));
  REQUIRE(mounts.ok());
  REQUIRE(mounts->size() == 10);  // 8 controllers, name=systemd, cgroup2
  const CgroupMount& memory = (*mounts)[3];
  CHECK(memory.version == 1);
  CHECK(memory.mount_point == "/sys/fs/cgroup/memory");
  CHECK(memory.root == "/");
  CHECK(memory.HasOption("memory"));
  CHECK_FALSE(memory.HasOption("rw"));
  CHECK((*mounts)[8].HasOption("name=systemd"));
  CHECK((*mounts)[9].version == 2);
  CHECK((*mounts)[9].mount_point == "/sys/fs/cgroup/unified");
}

TEST_CASE("mountinfo optional fields, escapes and namespaced roots are read", "[cgroups][files]") {
  absl::StatusOr<std::vector<CgroupMount>> mounts = ParseCgroupMounts(
      // systemd hosts tag mounts with optional fields before the "-".
      "35 25 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
      "rw,nsdelegate,memory_recursiveprot\n"
      "40 25 0:31 /kubepods/pod1 /host\\040cgroup/cpu,cpuacct rw master:3 - cgroup cgroup "
      "rw,cpu,cpuacct\n"
      "41 25 254:0 / / rw,relatime - ext4 /dev/vda rw\n");
  REQUIRE(mounts.ok());
  REQUIRE(mounts->size() == 2);
  CHECK((*mounts)[0].version == 2);
  CHECK((*mounts)[0].HasOption("nsdelegate"));
  CHECK((*mounts)[1].mount_point == "/host cgroup/cpu,cpuacct");
  CHECK((*mounts)[1].root == "/kubepods/pod1");
  CHECK((*mounts)[1].HasOption("cpuacct"));
  CHECK_FALSE(ParseCgroupMounts("35 25 0:30 / /sys\n").ok());
}

}  // namespace
}  // namespace kpath
