#include "probes/cgroups/dying_cgroup_counter.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "fmt/format.h"
#include "probes/cgroups/cgroup_files.h"
#include "probes/cgroups/cgroups_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

// Deeper than any real cgroup tree; bounds the recursion (and open descriptors) on a hostile one.
constexpr int kMaxDepth = 64;

// Subdirectories of the directory open as `fd`, recursively; takes ownership of `fd`.
uint64_t CountSubdirectories(int fd, int depth) {
  DIR* dir = fdopendir(fd);
  if (!dir) {
    close(fd);
    return 0;
  }
  uint64_t count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_type != DT_DIR && entry->d_type != DT_UNKNOWN) continue;
    const char* name = entry->d_name;
    if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
    struct stat st {};
    if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // removed meanwhile
    if (!S_ISDIR(st.st_mode)) continue;
    ++count;
    if (st.st_nlink == 2 || depth >= kMaxDepth) continue;  // a leaf: nothing below
    int sub = openat(dirfd(dir), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) count += CountSubdirectories(sub, depth + 1);
  }
  closedir(dir);
  return count;
}

struct CgroupCounts {
  uint64_t live = 0;
  uint64_t dying = 0;
};

// Where a hierarchy (v2, or the v1 one of `controller`) is seen whole: the first of its mounts
// whose directory is its root cgroup. Mountinfo's root field cannot say it: inside a cgroup
// namespace it is relative to the namespace's root, so the namespace's own subtree reads "/" and
// the host's whole hierarchy, bind-mounted in, "/../..". `subtree_only`: a mount was found, but
// none of the root.
struct HierarchyRoot {
  std::optional<std::filesystem::path> dir;
  bool subtree_only = false;
};
HierarchyRoot FindHierarchyRoot(const HostPaths& paths, const std::vector<CgroupMount>& mounts,
                                int version, std::string_view controller) {
  HierarchyRoot found;
  for (const CgroupMount& m : mounts) {
    if (m.version != version || (version == 1 && !m.HasOption(controller))) continue;
    std::filesystem::path dir = HostPathOfMount(paths, m.mount_point);
    if (!ShowsHierarchyRoot(dir, version)) {
      found.subtree_only = true;
      continue;
    }
    found.dir = std::move(dir);
    break;
  }
  return found;
}

}  // namespace

absl::StatusOr<uint64_t> CountCgroupDirectories(const std::filesystem::path& root) {
  int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        fmt::format("open {}: {}", root.string(), std::strerror(err)));
  }
  return 1 + CountSubdirectories(fd, 0);
}

bool ShowsHierarchyRoot(const std::filesystem::path& dir, int version) {
  auto exists = [&](const char* name) { return access((dir / name).c_str(), F_OK) == 0; };
  if (version == 1) return exists("cgroup.sane_behavior") || exists("release_agent");
  return !exists("cgroup.events") && !exists("cgroup.type");
}

std::filesystem::path HostPathOfMount(const HostPaths& paths, std::string_view mount_point) {
  if (mount_point == "/sys") return paths.sysfs_root();
  if (mount_point.starts_with("/sys/")) return paths.Sys(mount_point.substr(5));
  return std::filesystem::path(mount_point);
}

void DyingCgroupCounter::WarnOnce(const std::string& key, const std::string& message) {
  if (warned_.insert(key).second) spdlog::warn("collector {}: {}", kName, message);
}

absl::Status DyingCgroupCounter::Collect(MetricFamilies& out) {
  const std::filesystem::path mountinfo_path = paths_.Proc("self/mountinfo");
  absl::StatusOr<std::string> mountinfo_text = ReadFileToString(mountinfo_path);
  if (!mountinfo_text.ok()) return mountinfo_text.status();
  absl::StatusOr<std::vector<CgroupMount>> mounts = ParseCgroupMounts(*mountinfo_text);
  if (!mounts.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", mountinfo_path.string(), std::string(mounts.status().message())));
  }

  // /proc/cgroups is absent on kernels built without cgroup v1; v2 needs none of it.
  std::vector<CgroupController> controllers;
  const std::filesystem::path proc_cgroups_path = paths_.Proc("cgroups");
  if (absl::StatusOr<std::string> text = ReadFileToString(proc_cgroups_path); text.ok()) {
    absl::StatusOr<std::vector<CgroupController>> parsed = ParseProcCgroups(*text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: {}", proc_cgroups_path.string(),
                                                    std::string(parsed.status().message())));
    }
    controllers = *std::move(parsed);
  }

  std::map<std::string, CgroupCounts> rows;  // by controller label, sorted

  // cgroup v2: one cgroup.stat at the root has everything; a subtree's counts only its own.
  const HierarchyRoot v2 = FindHierarchyRoot(paths_, *mounts, 2, {});
  if (!v2.dir && v2.subtree_only) {
    WarnOnce("cgroup2",
             "the cgroup v2 hierarchy is mounted only as a subtree (a cgroup namespace without "
             "the host's /sys/fs/cgroup?): its live and dying cgroups are not reported");
  }
  if (v2.dir) {
    const std::filesystem::path& root = *v2.dir;
    const std::filesystem::path stat_path = root / "cgroup.stat";
    absl::StatusOr<std::string> text = ReadFileToString(stat_path);
    absl::StatusOr<CgroupStat> stat =
        text.ok() ? ParseCgroupStat(*text) : absl::StatusOr<CgroupStat>(text.status());
    if (!stat.ok()) {
      return absl::Status(stat.status().code(), fmt::format("{}: {}", stat_path.string(),
                                                            std::string(stat.status().message())));
    }
    const CgroupCounts hierarchy{stat->Get("nr_descendants").value_or(0) + 1,
                                 stat->Get("nr_dying_descendants").value_or(0)};
    rows[std::string(kV2Hierarchy)] = hierarchy;
    bool per_controller = false;
    for (const auto& [key, value] : stat->values) per_controller |= key.starts_with("nr_subsys_");
    std::set<std::string, std::less<>> subtree_control;  // "cpu io memory pids"
    if (!per_controller) {
      if (absl::StatusOr<std::string> t = ReadFileToString(root / "cgroup.subtree_control");
          t.ok()) {
        std::string_view rest = *t;
        while (!rest.empty()) {
          size_t end = rest.find_first_of(" \n");
          if (end > 0) subtree_control.emplace(rest.substr(0, end));
          if (end == std::string_view::npos) break;
          rest.remove_prefix(end + 1);
        }
      }
    }
    // Controllers bound to v2 are the enabled ones /proc/cgroups lists with hierarchy 0; without
    // /proc/cgroups, the ones the kernel names in cgroup.stat.
    std::vector<std::string> v2_controllers;
    for (const CgroupController& c : controllers) {
      if (c.enabled && c.hierarchy == 0) v2_controllers.push_back(c.name);
    }
    if (controllers.empty()) {
      for (const auto& [key, value] : stat->values) {
        if (key.starts_with("nr_subsys_")) v2_controllers.push_back(key.substr(10));
      }
    }
    for (const std::string& c : v2_controllers) {
      if (per_controller) {
        // Absent: the controller has no css on v2 (v1-only, such as net_cls).
        if (std::optional<uint64_t> live = stat->Get("nr_subsys_" + c)) {
          rows[c] = {*live, stat->Get("nr_dying_subsys_" + c).value_or(0)};
        }
      } else if (subtree_control.count(c) > 0) {
        rows[c] = hierarchy;
      }
    }
  }

  // cgroup v1: per hierarchy, num_cgroups against its directories, walked once.
  std::map<uint32_t, std::vector<const CgroupController*>> hierarchies;
  for (const CgroupController& c : controllers) {
    if (c.enabled && c.hierarchy != 0) hierarchies[c.hierarchy].push_back(&c);
  }
  for (const auto& [id, members] : hierarchies) {
    // /proc/cgroups counts the whole hierarchy, so only a mount of its root cgroup will do: in a
    // subtree (a container's own cgroup namespace) every live cgroup outside would count as dying.
    const HierarchyRoot found = FindHierarchyRoot(paths_, *mounts, 1, members.front()->name);
    if (!found.dir) {
      WarnOnce(fmt::format("hierarchy {}", id),
               found.subtree_only
                   ? fmt::format("the {} hierarchy is mounted only as a subtree (a cgroup "
                                 "namespace without the host's /sys/fs/cgroup?): its live and "
                                 "dying cgroups are not reported",
                                 members.front()->name)
                   : fmt::format("the {} hierarchy (/proc/cgroups hierarchy {}) is not mounted "
                                 "here: its cgroups are not counted",
                                 members.front()->name, id));
      continue;
    }
    const std::filesystem::path& root = *found.dir;
    absl::StatusOr<uint64_t> live = CountCgroupDirectories(root);
    if (!live.ok()) {
      WarnOnce(root.string(), fmt::format("cannot count the cgroups of {}: {}", root.string(),
                                          std::string(live.status().message())));
      continue;
    }
    for (const CgroupController* c : members) {
      // Read apart in time, the two can cross under churn: never report a negative.
      rows[c->name] = {*live, c->num_cgroups > *live ? c->num_cgroups - *live : 0};
    }
  }

  if (rows.empty()) {
    return absl::NotFoundError(
        fmt::format("no cgroup hierarchy found in {}", mountinfo_path.string()));
  }
  FamilyBuilder family(cgroups_metrics::kCgroups);
  for (const auto& [controller, counts] : rows) {
    family.Add({{"controller", controller}, {"state", "live"}}, static_cast<double>(counts.live));
    family.Add({{"controller", controller}, {"state", "dying"}}, static_cast<double>(counts.dying));
  }
  family.AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
