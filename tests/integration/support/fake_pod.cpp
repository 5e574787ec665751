#include "support/fake_pod.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kpath::testing {

FakePod::FakePod(const std::string& hierarchy, const std::string& parent, bool systemd_driver,
                 const TempDir& logs, const std::string& ns, const std::string& pod,
                 const std::string& container, int n)
    : parent_(hierarchy + "/" + parent) {
  char uid[40], id[65];
  snprintf(uid, sizeof(uid), "%08x-4c5d-4e6f-8a7b-%012x", getpid(), n);
  snprintf(id, sizeof(id), "%016x%048x", getpid(), n);
  std::string uid_ = uid;
  std::replace(uid_.begin(), uid_.end(), '-', '_');
  const std::string path = systemd_driver
                               ? "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                                     uid_ + ".slice/cri-containerd-" + id + ".scope"
                               : "/kubepods/burstable/pod" + std::string(uid) + "/" + id;
  cgroup_ = parent_ + path;
  std::filesystem::create_directories(cgroup_);
  std::filesystem::create_directories(logs / "pods/" + ns + "_" + pod + "_" + uid + "/" +
                                      container);
  std::filesystem::create_directories(logs / "containers");
  std::ofstream(logs / "containers/" + pod + "_" + ns + "_" + container + "-" + id + ".log");
}

namespace {
// Whether a cgroup directory has a child cgroup (rmdir then fails with EBUSY, for good).
bool HasChildCgroup(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec)) return true;
  }
  return false;
}
}  // namespace

FakePod::~FakePod() {
  // Deepest first; the processes placed here have exited and been waited for (a cgroup whose
  // last process just exited may be busy for a moment). A directory with another FakePod's
  // cgroups below it stays for that one to remove.
  for (std::filesystem::path p = cgroup_; p.string().size() >= parent_.size();
       p = p.parent_path()) {
    if (HasChildCgroup(p)) break;
    for (int i = 0; i < 100 && rmdir(p.c_str()) != 0 && errno == EBUSY; ++i) usleep(10000);
  }
}

std::optional<std::string> MountOf(bool v2) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    const bool is_v2 = line.find(" - cgroup2 ") != std::string::npos;
    const bool is_v1 = line.find(" - cgroup ") != std::string::npos;
    if ((v2 && is_v2) || (!v2 && is_v1 && line.find(",memory") != std::string::npos)) {
      std::istringstream fields(line);
      std::string f;
      for (int i = 0; i < 5; ++i) fields >> f;
      return f;
    }
  }
  return std::nullopt;
}

}  // namespace kpath::testing
