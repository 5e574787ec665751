// LiveKernelFeatures against the real /proc and /sys of the machine running the test (root).
// Expectations are those of the development/CI kernel described in docs/kernel-facts.md
// (Linux 6.18, BTF, no CONFIG_KPROBES, tracefs not mounted by default).
#include <bpf/libbpf.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "probes/kernel/host_paths.h"
#include "probes/kernel/kernel_features.h"

namespace kpath {
namespace {

bool SkipUnlessRoot() {
  if (geteuid() == 0) return false;
  WARN("skipped: needs root (kallsyms addresses, mounting tracefs); run as root");
  return true;
}

// Whether a tracefs is mounted at `mount_point`, from /proc/mounts.
bool TracefsMountedAt(const std::string& mount_point) {
  std::ifstream mounts("/proc/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string source, target, type;
    fields >> source >> target >> type;
    if (target == mount_point && type == "tracefs") return true;
  }
  return false;
}

// The percpu allocator's worker as this kernel names it (pcpu_alloc_noprof since 6.10, the static
// pcpu_alloc before) and its address, from the raw /proc/kallsyms; {"", 0} if neither is there.
std::pair<std::string, uint64_t> PercpuAllocator() {
  for (const std::string name : {"pcpu_alloc_noprof", "pcpu_alloc"}) {
    std::ifstream raw("/proc/kallsyms");
    for (std::string line; std::getline(raw, line);) {
      if (line.ends_with(" T " + name) || line.ends_with(" t " + name)) {
        return {name, std::stoull(line.substr(0, line.find(' ')), nullptr, 16)};
      }
    }
  }
  return {"", 0};
}

TEST_CASE("real kernel: vmlinux BTF describes percpu_alloc_percpu with 10 arguments",
          "[kernel-live]") {
  if (SkipUnlessRoot()) return;
  LiveKernelFeatures features(HostPaths(), /*may_mount=*/false);
  if (!std::filesystem::exists("/sys/kernel/btf/vmlinux")) {
    WARN("skipped: no vmlinux BTF (hidden, or a kernel built without it)");
    return;
  }
  REQUIRE(features.HasVmlinuxBtf());
  // 5.19 added call_site, bytes_alloc and gfp_flags to the 7 older arguments.
  std::optional<int> alloc_args = features.BtfTracepointArgs("percpu_alloc_percpu");
  REQUIRE(alloc_args);
  CHECK((*alloc_args == 10 || *alloc_args == 7));
  CHECK(features.BtfTracepointArgs("percpu_free_percpu") == 3);
  CHECK(features.BtfTracepointArgs("no_such_event_kpath") == std::nullopt);
  std::string allocator = PercpuAllocator().first;
  REQUIRE_FALSE(allocator.empty());
  CHECK(features.BtfHasFunction(allocator));
  CHECK_FALSE(features.BtfHasFunction("no_such_function_kpath"));
  CHECK(features.TracepointExists("percpu", "percpu_alloc_percpu"));
  CHECK_FALSE(features.TracepointExists("percpu", "no_such_event_kpath"));
}

TEST_CASE("real kernel: kallsyms resolves the percpu allocator and symbolizes it",
          "[kernel-live]") {
  if (SkipUnlessRoot()) return;
  LiveKernelFeatures features(HostPaths(), /*may_mount=*/false);
  auto kallsyms = features.Kallsyms();
  REQUIRE(kallsyms != nullptr);
  CHECK(kallsyms->size() > 10000);
  auto [allocator, address] = PercpuAllocator();  // pcpu_alloc_noprof here, pcpu_alloc on 6.1
  REQUIRE_FALSE(allocator.empty());
  CHECK(features.KernelFunction(allocator) == allocator);
  CHECK(features.KernelFunction("no_such_function_kpath") == std::nullopt);
  if (kallsyms->AddressesHidden()) {
    WARN("kallsyms addresses hidden (kptr_restrict): symbolization not checked");
  } else {
    // KASLR moves the text: the function's address comes from the raw file.
    REQUIRE(address != 0);
    CHECK(kallsyms->Symbolize(address + 0x20) == allocator);
  }
  CHECK(features.PossibleCpus() == libbpf_num_possible_cpus());
}

TEST_CASE("real kernel: kprobes are reported available, or unavailable with the reason",
          "[kernel-live]") {
  if (SkipUnlessRoot()) return;
  LiveKernelFeatures features(HostPaths(), /*may_mount=*/true);
  absl::Status kprobes = features.KprobesAvailable();
  // The kprobe perf event source exists exactly on kernels with CONFIG_KPROBES (Debian's 6.1
  // under QEMU, tests/qemu); the development kernel has it off (docs/kernel-facts.md).
  if (std::filesystem::exists("/sys/bus/event_source/devices/kprobe")) {
    CHECK(kprobes.ok());
    return;
  }
  REQUIRE_FALSE(kprobes.ok());
  CHECK(kprobes.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(kprobes.message()), Catch::Contains("CONFIG_KPROBES"));
}

TEST_CASE("real kernel: classic tracepoint format through tracefs", "[kernel-live]") {
  if (SkipUnlessRoot()) return;
  LiveKernelFeatures features(HostPaths(), /*may_mount=*/true);
  auto tracefs = features.Tracefs();
  REQUIRE(tracefs.ok());
  auto format = features.Tracepoint("percpu", "percpu_alloc_percpu");
  REQUIRE(format.ok());
  CHECK(format->name == "percpu_alloc_percpu");
  CHECK(format->id > 0);
  // The fields of the tracepoint's arguments: call_site and bytes_alloc both (Linux 5.19+, as
  // this development kernel) or neither (the 7 older ones), as its BTF says where it has BTF.
  const TracepointField* bytes_alloc = format->Find("bytes_alloc");
  const TracepointField* call_site = format->Find("call_site");
  CHECK((bytes_alloc == nullptr) == (call_site == nullptr));
  if (bytes_alloc) CHECK(bytes_alloc->size == 8);
  CHECK(format->Find("ptr") != nullptr);
  CHECK(format->Find("size") != nullptr);
  if (std::optional<int> args = features.BtfTracepointArgs("percpu_alloc_percpu")) {
    CHECK((bytes_alloc != nullptr) == (*args == 10));
  }
  auto missing = features.Tracepoint("percpu", "no_such_event_kpath");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

// Runs in a forked child inside its own mount namespace, so that tracefs can be unmounted there
// whatever the host has mounted, and nothing the child does reaches the host. Returns "" on
// success, else what went wrong.
std::string MountAndUnmountInPrivateNamespace() {
  const std::string tracing = "/sys/kernel/tracing";
  if (unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + strerror(errno);
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return std::string("make / rprivate: ") + strerror(errno);
  }
  for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    while (TracefsMountedAt(dir)) {
      if (umount2(dir, MNT_DETACH) != 0)
        return std::string("umount ") + dir + ": " + strerror(errno);
    }
  }
  if (TracefsMountedAt("/sys/kernel/debug")) return "debugfs automounts tracing";
  {
    LiveKernelFeatures features(HostPaths(), /*may_mount=*/true);
    auto tracefs = features.Tracefs();
    if (!tracefs.ok()) return "Tracefs(): " + std::string(tracefs.status().message());
    if (*tracefs != tracing) return "Tracefs() gave " + tracefs->string();
    if (!TracefsMountedAt(tracing)) return "Tracefs() succeeded but nothing is mounted";
    auto format = features.Tracepoint("percpu", "percpu_alloc_percpu");
    if (!format.ok()) return "Tracepoint(): " + std::string(format.status().message());
  }
  if (TracefsMountedAt(tracing)) return "tracefs still mounted after destruction";
  return "";
}

TEST_CASE("real kernel: tracefs mounted by LiveKernelFeatures is unmounted on destruction",
          "[kernel-live]") {
  if (SkipUnlessRoot()) return;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    std::string error = MountAndUnmountInPrivateNamespace();
    if (!error.empty()) (void)!write(fds[1], error.data(), error.size());
    _exit(error.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string error;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) error.append(buf, n);
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO(error);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace kpath
