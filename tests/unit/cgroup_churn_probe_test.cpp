#include "probes/cgroups/cgroup_churn_probe.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <string>

#include "probes/cgroups/cgroup_churn.h"
#include "probes/kernel/kernel_features.h"

namespace kpath {
namespace {

namespace fs = std::filesystem;
const fs::path kLinux618 = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

// The labels of a key counted for process `comm` and the path tail user space received for it.
std::vector<std::string> Labels(const std::string& comm, const std::string& tail,
                                bool truncated = false) {
  cgroup_churn_key key;
  std::memset(&key, 0, sizeof(key));
  std::memcpy(key.comm, comm.data(), std::min(comm.size(), sizeof(key.comm)));
  cgroup_churn_path path;
  std::memset(&path, 0, sizeof(path));
  std::memcpy(path.tail, tail.data(), std::min(tail.size(), sizeof(path.tail) - 1));
  path.truncated = truncated ? 1 : 0;
  return CgroupChurnLabels(key, path);
}

TEST_CASE("a counted key becomes its process and folded unit", "[cgroups][churn]") {
  CHECK(Labels("systemd", "/system.slice/run-u4711.service") ==
        std::vector<std::string>{"systemd", "run-*.service"});
  CHECK(Labels("kpath-churner", "/kpath-test.slice/kpath-churn.service") ==
        std::vector<std::string>{"kpath-churner", "kpath-churn.service"});
  CHECK(Labels("containerd", "/") == std::vector<std::string>{"containerd", "none"});
  CHECK(Labels("containerd", "") == std::vector<std::string>{"containerd", "none"});
  // The kernel keeps a NUL in the 16 bytes; the read is bounded even without one.
  CHECK(Labels("0123456789abcdef", "/a.slice")[0] == "0123456789abcdef");
  CHECK(Labels("x", "ice/kpath-churn.service", true)[1] == "kpath-churn.service");
  // A tail that fills all 128 bytes without a NUL is still read within bounds.
  cgroup_churn_path full;
  std::memset(full.tail, 'a', sizeof(full.tail));
  full.truncated = 1;
  CHECK(CgroupChurnUnit(full) == "none");
}

// Whether the programs may count `tail`'s name by its shape (digits replaced): only when the
// unit does not depend on the digits' values.
bool FoldsAlike(const std::string& tail, bool truncated = false, bool pod_labels = false) {
  cgroup_churn_path path;
  std::memset(&path, 0, sizeof(path));
  std::memcpy(path.tail, tail.data(), std::min(tail.size(), sizeof(path.tail) - 1));
  path.truncated = truncated ? 1 : 0;
  return CgroupChurnShapeFoldsAlike(path, pod_labels);
}

TEST_CASE("a name shape is counted as one only where the fold drops its digits",
          "[cgroups][churn]") {
  // Transient units: the digits fold to "*".
  CHECK(FoldsAlike("/system.slice/run-u4711.service"));
  CHECK(FoldsAlike("/user.slice/user-1000.slice/session-5.scope"));
  CHECK(FoldsAlike("/kubepods.slice/cri-containerd-0123456789abcdef0123456789abcdef.scope"));
  CHECK(FoldsAlike("/k.slice/kubepods-pod8f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice"));
  // A cgroup below a unit, with digits: its unit is its parent's, whatever they are.
  CHECK(FoldsAlike("/system.slice/foo.service/worker-17"));
  CHECK(FoldsAlike("ice/foo.service/worker-17", true));
  // Kept digits: per-user units, versions, a name's first word.
  CHECK_FALSE(FoldsAlike("/user.slice/user-1000.slice/user@1000.service"));
  CHECK_FALSE(FoldsAlike("/user.slice/user-1000.slice"));
  CHECK_FALSE(FoldsAlike("/system.slice/php8.2-fpm.service"));
  CHECK_FALSE(FoldsAlike("/system.slice/e2scrub@dev.service"));
  CHECK_FALSE(FoldsAlike("/system.slice/foo1.service"));
  // No digits: nothing to share.
  CHECK_FALSE(FoldsAlike("/system.slice/kpath-churn.service"));
  CHECK_FALSE(FoldsAlike(""));
  // Digits above the name do not count: they are the same for every name of a shape.
  CHECK_FALSE(FoldsAlike("/user.slice/user-1000.slice/app.slice"));
}

TEST_CASE("with pod labels, a pod's or a container's name depends on its digits",
          "[cgroups][churn][kubernetes]") {
  const std::string id = "3f1e9a7c2b4d6e8f0a1c3e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f";
  const std::string pod_slice =
      "/kubepods.slice/kubepods-burstable.slice/"
      "kubepods-burstable-pod6b3c0d4e_8f2a_4c1b_9d7e_2a5f1c3b4d6e.slice";
  // The container scope's last 127 bytes, what the programs send: its pod's uid is cut.
  const std::string whole_scope = pod_slice + "/cri-containerd-" + id + ".scope";
  const std::string scope = whole_scope.substr(whole_scope.size() - 127);
  const std::string cgroupfs = "/kubepods/besteffort/pod0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b";
  // Without pod labels the unit alone counts: one shape for every pod.
  CHECK(FoldsAlike(pod_slice));
  CHECK(FoldsAlike(scope, true));
  // With them, two pods (two containers) are two keys: the uid (the id) is in the labels.
  CHECK_FALSE(FoldsAlike(pod_slice, false, true));
  CHECK_FALSE(FoldsAlike(scope, true, true));
  CHECK_FALSE(FoldsAlike(cgroupfs, false, true));
  CHECK_FALSE(FoldsAlike(cgroupfs + "/" + id, false, true));
  // Digits in a name below a container, or outside the kubepods tree, still fold.
  CHECK(FoldsAlike(cgroupfs + "/" + id.substr(0, 16) + "/worker-17", false, true));
  CHECK(FoldsAlike("/system.slice/run-u4711.service", false, true));
  CHECK(CgroupChurnPod([&] {
          cgroup_churn_path path;
          std::memset(&path, 0, sizeof(path));
          std::memcpy(path.tail, scope.data(), scope.size());
          path.truncated = 1;
          return path;
        }()) == KubepodsCgroup{"", id});
}

TEST_CASE("label values are valid UTF-8 whatever the bytes", "[cgroups][churn]") {
  // "进程" cut in its last character by the 15-byte comm limit, and a control character.
  std::string comm = "\xe8\xbf\x9b\xe7\xa8";
  CHECK(Labels(comm, "/")[0] == "\xe8\xbf\x9b??");
  CHECK(Labels("a\tb", "/")[0] == "a?b");
  CHECK(Labels("\xe8\xbf\x9b\xe7\xa8\x8b", "/")[0] == "\xe8\xbf\x9b\xe7\xa8\x8b");
}

TEST_CASE("the STATUS fragment gives the churn rate and the busiest unit", "[cgroups][churn]") {
  CHECK(CgroupChurnStatus(std::nullopt, "foo.service").empty());
  CHECK(CgroupChurnStatus(12.3, "foo.service") == "cgroup churn 12/s (top unit foo.service)");
  CHECK(CgroupChurnStatus(0.25, "run-*.service") == "cgroup churn 0.2/s (top unit run-*.service)");
  CHECK(CgroupChurnStatus(2.0, "a.service") == "cgroup churn 2/s (top unit a.service)");
  CHECK(CgroupChurnStatus(0.0, "foo.service") == "cgroup churn 0/s");
  CHECK(CgroupChurnStatus(-0.4, "") == "cgroup churn 0/s");
  CHECK(CgroupChurnStatus(5.0, "") == "cgroup churn 5/s");
}

TEST_CASE("on the 6.18 fixture tree (no BTF) only the classic tracepoint is supported",
          "[cgroups][churn]") {
  LiveKernelFeatures kernel(HostPaths(kLinux618 / "proc", kLinux618 / "sys"), /*may_mount=*/false);
  CgroupChurnProbe probe(kernel, {});
  std::vector<AttachPlan> plans = probe.Plans();
  REQUIRE(plans.size() == 3);
  CHECK(plans[0].mechanism == Mechanism::kTpBtf);
  CHECK(plans[1].mechanism == Mechanism::kRawTp);
  CHECK(plans[2].mechanism == Mechanism::kTracepoint);
  CHECK(plans[0].target == "cgroup:cgroup_mkdir/cgroup_rmdir");
  CHECK_FALSE(probe.Supported(plans[0]).ok());
  CHECK(probe.Supported(plans[2]).ok());
  CHECK(probe.Supported({Mechanism::kKprobe, "cgroup_mkdir"}).code() ==
        absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kpath
