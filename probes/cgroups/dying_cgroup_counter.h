// kpath_cgroups{controller,state}: live and dying cgroups per controller (seed 000). A removed
// cgroup whose memory cgroup still holds charged pages stays "dying", with its per-CPU
// statistics, for as long as the kernel keeps it; a directory count (the seed's "71 cgroups")
// never shows it.
//
// Where the numbers come from, per hierarchy (v1, v2 and the hybrid of both):
//  - cgroup v2: the root's cgroup.stat. nr_descendants + 1 live and nr_dying_descendants dying
//    cgroups, exported as controller="cgroup2"; per controller nr_subsys_<c> and
//    nr_dying_subsys_<c> (Linux 6.11+). An older kernel has no per-controller counts: each
//    controller enabled in the root's cgroup.subtree_control then gets the hierarchy's counts,
//    an upper bound (a controller holds state in the cgroups where it is enabled).
//  - cgroup v1: /proc/cgroups num_cgroups counts the hierarchy's cgroups, dying included, and
//    the live ones are the hierarchy's directories: dying = num_cgroups - directories.
// Mounts are found in /proc/self/mountinfo; a hierarchy mounted only as a subtree (a cgroup
// namespace's own mount, a bind mount of a subdirectory) is skipped with a warning, since
// num_cgroups counts the whole of it. Whether a mount shows the root is read from the directory
// (ShowsHierarchyRoot), not from mountinfo's root field, which is relative to the reader's cgroup
// namespace: in a container the namespace's own subtree reads "/", and the host's whole
// hierarchy, bind-mounted in as deploy/kubernetes/daemonset.yaml does, "/../..".
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "probes/collect/collector.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

// The cgroups of a hierarchy mounted at `root`: its directories, `root` itself included.
// O(cgroups) in stat() calls, but a leaf directory (link count 2: cgroupfs, like most
// filesystems, gives a directory 2 + subdirectories links) is never opened or listed, and most
// cgroups are leaves. Directories that vanish during the walk are not errors.
absl::StatusOr<uint64_t> CountCgroupDirectories(const std::filesystem::path& root);

// Whether `dir`, a cgroup mount's directory, is its hierarchy's root cgroup (not a subtree), by the
// files the kernel makes only there (v1: cgroup.sane_behavior, release_agent) or everywhere but
// there (v2: cgroup.events, cgroup.type).
bool ShowsHierarchyRoot(const std::filesystem::path& dir, int version);

// Where a mount point of the host is read through `paths`: under /sys it moves with the sysfs
// root (fixture trees, /host/sys in a container); anything else is used as it is.
std::filesystem::path HostPathOfMount(const HostPaths& paths, std::string_view mount_point);

class DyingCgroupCounter final : public Collector {
 public:
  static constexpr std::string_view kName = "cgroups";
  // The controller label of the v2 hierarchy's own counts (not a controller name).
  static constexpr std::string_view kV2Hierarchy = "cgroup2";

  explicit DyingCgroupCounter(HostPaths paths) : paths_(std::move(paths)) {}

  std::string_view Name() const override { return kName; }
  absl::Status Collect(MetricFamilies& out) override;

 private:
  // Logs `message` at warn level the first time `key` is seen.
  void WarnOnce(const std::string& key, const std::string& message);

  HostPaths paths_;
  std::set<std::string> warned_;
};

}  // namespace kpath
