// The kernel's cgroup bookkeeping files, as data: /proc/cgroups, a cgroup v2 `cgroup.stat`, and
// the cgroup mounts of /proc/self/mountinfo. Pure functions of the file's text, so they run
// against fixtures from any kernel.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kpath {

// One line of /proc/cgroups.
struct CgroupController {
  std::string name;        // "memory"
  uint32_t hierarchy = 0;  // v1 hierarchy id; 0: bound to the v2 hierarchy (or to none)
  // Cgroups of the controller's hierarchy, live and dying: the kernel decrements it only when a
  // removed cgroup is finally freed.
  uint64_t num_cgroups = 0;
  bool enabled = true;
};

// Parses /proc/cgroups ("#subsys_name hierarchy num_cgroups enabled" and one line per
// controller). Columns are found by the header's names, so a kernel that adds or drops one is
// read right; without a header the classic four columns are assumed. InvalidArgument, naming
// the line, for a line that does not parse; for a text without any controller too.
absl::StatusOr<std::vector<CgroupController>> ParseProcCgroups(std::string_view text);

// A cgroup v2 `cgroup.stat`: "nr_descendants 70", "nr_dying_descendants 5000", and since Linux
// 6.11 "nr_subsys_<controller>" (live csses of the subtree, itself included) and
// "nr_dying_subsys_<controller>".
struct CgroupStat {
  std::map<std::string, uint64_t, std::less<>> values;
  std::optional<uint64_t> Get(std::string_view key) const;
};
absl::StatusOr<CgroupStat> ParseCgroupStat(std::string_view text);

// A cgroup filesystem mount, from /proc/self/mountinfo.
struct CgroupMount {
  int version = 1;          // 1: "cgroup", 2: "cgroup2"
  std::string mount_point;  // as the reading process sees it, octal escapes (\040) decoded
  // The hierarchy's directory shown at the mount point: "/" for the whole hierarchy; a subtree
  // inside a cgroup namespace or for a bind mount.
  std::string root;
  // Super options without rw/ro: v1 controllers ("cpu", "cpuacct"), "name=systemd", "xattr", ...
  std::vector<std::string> options;
  bool HasOption(std::string_view option) const;
};

// The cgroup and cgroup2 mounts of a mountinfo text, in file order. InvalidArgument, naming the
// line, for a line too short to be a mountinfo line.
absl::StatusOr<std::vector<CgroupMount>> ParseCgroupMounts(std::string_view mountinfo);

// The directory of a process's own cgroup (from its /proc/PID/cgroup text) in the hierarchy that
// tracks processes: the unified v2 one when it is mounted, else the v1 `name=systemd` one, else
// the first mounted v1 hierarchy; through a mount that shows it (its root a prefix of the
// path). nullopt if none does.
std::optional<std::string> OwnCgroupDirectory(std::string_view proc_pid_cgroup,
                                              const std::vector<CgroupMount>& mounts);

}  // namespace kpath
