// Test support: a Kubernetes pod as the kubelet and containerd lay it out on this host (its
// cgroups and its log names), for the pod-label tests of the madvise and cgroup_churn probes.
#pragma once

#include <optional>
#include <string>

#include "support/temp_dir.h"

namespace kpath::testing {

// A pod's container cgroup (systemd driver: kubepods-burstable-pod<uid>.slice/
// cri-containerd-<id>.scope; cgroupfs driver: kubepods/burstable/pod<uid>/<id>) under a
// test-owned parent in `hierarchy`, made with every missing directory above it, and its log
// directory and log symlink under `logs`. Removes the cgroups, the parent included, when
// destroyed (the logs go with `logs`). The uid and id are the pid and `n`: unique per process.
class FakePod {
 public:
  FakePod(const std::string& hierarchy, const std::string& parent, bool systemd_driver,
          const TempDir& logs, const std::string& ns, const std::string& pod,
          const std::string& container, int n);
  ~FakePod();
  FakePod(const FakePod&) = delete;
  FakePod& operator=(const FakePod&) = delete;
  const std::string& cgroup() const { return cgroup_; }

 private:
  std::string parent_, cgroup_;
};

// The unified hierarchy's mount point (`v2`), or the v1 memory hierarchy's (nullopt if none).
std::optional<std::string> MountOf(bool v2);

}  // namespace kpath::testing
