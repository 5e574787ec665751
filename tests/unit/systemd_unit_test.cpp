#include "probes/kernel/systemd_unit.h"

#include <catch2/catch.hpp>
#include <string>

namespace kpath {
namespace {

// A container id as docker, containerd, CRI-O and podman print them: 64 hex digits.
const std::string kContainerId = "4a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
// A pod UID as the kubelet's systemd driver writes it in slice names ("-" escaped as "_").
const std::string kPodUid = "8f4c2a9e_3b1d_4e5f_9a7b_2c6d8e0f1a3b";

TEST_CASE("the unit is the deepest unit component of the cgroup path", "[cgroups][unit]") {
  CHECK(SystemdUnitOfCgroupPath("/system.slice/cron.service") == "cron.service");
  CHECK(SystemdUnitOfCgroupPath("/system.slice") == "system.slice");
  CHECK(SystemdUnitOfCgroupPath("/init.scope") == "init.scope");
  CHECK(SystemdUnitOfCgroupPath("/kpath-test.slice/kpath-churn.service") == "kpath-churn.service");
  // Delegated subtrees: the unit owns the cgroups its processes create below it.
  CHECK(SystemdUnitOfCgroupPath("/system.slice/kpath-churn.service/sub") == "kpath-churn.service");
  CHECK(SystemdUnitOfCgroupPath("/machine.slice/systemd-nspawn@debian.service/payload") ==
        "systemd-nspawn@debian.service");
  CHECK(SystemdUnitOfCgroupPath(
            "/user.slice/user-1000.slice/user@1000.service/app.slice/snap.lxd.daemon.service") ==
        "snap.lxd.daemon.service");
  CHECK(SystemdUnitOfCgroupPath("/system.slice/systemd-journald.socket") ==
        "systemd-journald.socket");
  CHECK(SystemdUnitOfCgroupPath("/system.slice/var-lib-docker-overlay2-" + kContainerId +
                                "-merged.mount") == "var-lib-docker-overlay2-*-merged.mount");
}

TEST_CASE("a path without a unit is none", "[cgroups][unit]") {
  CHECK(SystemdUnitOfCgroupPath("/") == "none");
  CHECK(SystemdUnitOfCgroupPath("") == "none");
  CHECK(SystemdUnitOfCgroupPath("/docker/" + kContainerId) == "none");  // cgroupfs driver
  CHECK(SystemdUnitOfCgroupPath("/lxc.payload.web/init") == "none");
  CHECK(SystemdUnitOfCgroupPath("/kpath-test-percpu-1") == "none");
  CHECK(SystemdUnitOfCgroupPath("/.service") == "none");  // a suffix alone names nothing
}

TEST_CASE("per-user units keep their uid", "[cgroups][unit]") {
  CHECK(SystemdUnitOfCgroupPath("/user.slice/user-1000.slice") == "user-1000.slice");
  CHECK(SystemdUnitOfCgroupPath("/user.slice/user-1000.slice/user@1000.service") ==
        "user@1000.service");
  CHECK(SystemdUnitOfCgroupPath(
            "/system.slice/system-user\\x2druntime\\x2ddir.slice/user-runtime-dir@1000.service") ==
        "user-runtime-dir@1000.service");
  CHECK(SystemdUnitOfCgroupPath("/user.slice/user-1000.slice/user@1000.service/init.scope") ==
        "init.scope");
}

TEST_CASE("login sessions fold to session-*.scope", "[cgroups][unit]") {
  CHECK(SystemdUnitOfCgroupPath("/user.slice/user-1000.slice/session-42.scope") ==
        "session-*.scope");
  CHECK(SystemdUnitOfCgroupPath("/user.slice/user-0.slice/session-7391.scope") ==
        "session-*.scope");
  CHECK(SystemdUnitOfCgroupPath("/user.slice/user-120.slice/session-c3.scope") ==
        "session-*.scope");  // logind's greeter sessions
}

TEST_CASE("systemd-run transient units fold to run-*", "[cgroups][unit]") {
  CHECK(FoldTransientUnitName("run-u123.service") == "run-*.service");
  CHECK(FoldTransientUnitName("run-u7.scope") == "run-*.scope");
  CHECK(FoldTransientUnitName("run-r6a3c0e5f9b2d4c8e7f1a0b9c8d7e6f5a.scope") == "run-*.scope");
  CHECK(FoldTransientUnitName("run-r6a3c0e5f9b2d4c8e7f1a0b9c8d7e6f5a.service") == "run-*.service");
  CHECK(FoldTransientUnitName("run-p4242-i4243.scope") == "run-*.scope");
}

TEST_CASE("container scopes fold their ids", "[cgroups][unit]") {
  CHECK(SystemdUnitOfCgroupPath("/system.slice/docker-" + kContainerId + ".scope") ==
        "docker-*.scope");
  CHECK(SystemdUnitOfCgroupPath("/machine.slice/libpod-" + kContainerId + ".scope") ==
        "libpod-*.scope");
  CHECK(SystemdUnitOfCgroupPath("/machine.slice/libpod-conmon-" + kContainerId + ".scope") ==
        "libpod-conmon-*.scope");
  CHECK(SystemdUnitOfCgroupPath("/system.slice/crio-" + kContainerId + ".scope") == "crio-*.scope");
  const std::string pod =
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kPodUid + ".slice";
  CHECK(SystemdUnitOfCgroupPath(pod) == "kubepods-burstable-pod*.slice");
  CHECK(SystemdUnitOfCgroupPath(pod + "/cri-containerd-" + kContainerId + ".scope") ==
        "cri-containerd-*.scope");
  CHECK(SystemdUnitOfCgroupPath("/kubepods.slice/kubepods-pod" + kPodUid + ".slice") ==
        "kubepods-pod*.slice");
  CHECK(SystemdUnitOfCgroupPath("/kubepods.slice/kubepods-besteffort.slice") ==
        "kubepods-besteffort.slice");
  // A scope named by its id alone.
  CHECK(FoldTransientUnitName(kContainerId + ".scope") == "*.scope");
}

TEST_CASE("instance names stay unless they look transient", "[cgroups][unit]") {
  CHECK(SystemdUnitOfCgroupPath("/system.slice/system-getty.slice/getty@tty1.service") ==
        "getty@tty1.service");
  CHECK(FoldTransientUnitName("serial-getty@ttyS0.service") == "serial-getty@ttyS0.service");
  CHECK(FoldTransientUnitName("wg-quick@wg0.service") == "wg-quick@wg0.service");
  CHECK(FoldTransientUnitName("modprobe@drm.service") == "modprobe@drm.service");
  CHECK(FoldTransientUnitName("systemd-coredump@0-4242-0.service") == "systemd-coredump@*.service");
  CHECK(FoldTransientUnitName("sshd@3-10.0.0.1:22-10.0.0.2:54321.service") == "sshd@*.service");
  CHECK(FoldTransientUnitName("container-getty@1.service") == "container-getty@*.service");
  CHECK(FoldTransientUnitName("postgresql@15-main.service") == "postgresql@*-main.service");
}

TEST_CASE("desktop and snap scopes fold their pids and uuids", "[cgroups][unit]") {
  CHECK(FoldTransientUnitName("app-gnome-firefox-4567.scope") == "app-gnome-firefox-*.scope");
  CHECK(FoldTransientUnitName("vte-spawn-2b0fa4e1-4c0d-4b6e-9d3a-1f2e3d4c5b6a.scope") ==
        "vte-spawn-*.scope");
  CHECK(FoldTransientUnitName("snap.firefox.hook.configure-7a2c5b1e-8f3d-4a6b-9c0e-1d2f3a4b5c6d"
                              ".scope") == "snap.firefox.hook.configure-*.scope");
}

TEST_CASE("stable names are left alone", "[cgroups][unit]") {
  for (const char* name :
       {"cron.service", "x11-common.service", "php8.2-fpm.service", "systemd-journald.service",
        "kubepods-burstable.slice", "e2scrub_reap.service", "deadbeef-cafe.service", "system.slice",
        "system-systemd\\x2dfsck.slice", "snap.lxd.daemon.service"}) {
    CAPTURE(name);
    CHECK(FoldTransientUnitName(name) == name);
  }
}

TEST_CASE("a cut path tail ignores its partial first component", "[cgroups][unit]") {
  CHECK(SystemdUnitOfPathTail(
            "4e5f_9a7b_2c6d8e0f1a3b.slice/cri-containerd-" + kContainerId + ".scope", true) ==
        "cri-containerd-*.scope");
  // "ice/foo.service" cut from "/system.slice/foo.service": "ice" is not a slice.
  CHECK(SystemdUnitOfPathTail("ice/foo.service/sub", true) == "foo.service");
  CHECK(SystemdUnitOfPathTail("lice/x", true) == "none");
  CHECK(SystemdUnitOfPathTail("containerd-" + kContainerId + ".scope", true) == "none");
  CHECK(SystemdUnitOfPathTail("/system.slice/foo.service", false) == "foo.service");
}

}  // namespace
}  // namespace kpath
