#include "probes/hooks/debugfs_mount.h"

#include <sys/mount.h>
#include <sys/vfs.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

constexpr long kDebugfsMagic = 0x64626720;  // DEBUGFS_MAGIC, include/uapi/linux/magic.h

bool IsDebugfs(const std::filesystem::path& path) {
  struct statfs fs;
  return ::statfs(path.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kDebugfsMagic;
}

}  // namespace

DebugfsMount::DebugfsMount(HostPaths paths, bool may_mount)
    : paths_(std::move(paths)), may_mount_(may_mount) {}

DebugfsMount::~DebugfsMount() {
  if (mounted_.empty()) return;
  if (::umount2(mounted_.c_str(), MNT_DETACH) != 0) {
    spdlog::warn("unmounting debugfs at {} (mounted by kpathd): {}", mounted_.string(),
                 std::strerror(errno));
  }
}

std::optional<std::filesystem::path> DebugfsMount::KprobesDir() {
  if (tried_) return kprobes_;
  tried_ = true;
  std::filesystem::path debug = paths_.Sys("kernel/debug");
  std::filesystem::path kprobes = debug / "kprobes";
  if (IsDirectory(kprobes)) {
    kprobes_ = kprobes;
    return kprobes_;
  }
  if (IsDebugfs(debug) || !may_mount_) {
    problem_ = IsDebugfs(debug)
                   ? fmt::format("no {} in the mounted debugfs", kprobes.string())
                   : fmt::format("no {} (debugfs not mounted there; mounting not allowed)",
                                 kprobes.string());
    return std::nullopt;
  }
  if (::mount("debugfs", debug.c_str(), "debugfs", 0, nullptr) != 0) {
    problem_ = fmt::format("no {}: mount -t debugfs debugfs {}: {}", kprobes.string(),
                           debug.string(), std::strerror(errno));
    return std::nullopt;
  }
  if (!IsDirectory(kprobes)) {
    // Nothing to read here: leave the host as it was.
    ::umount2(debug.c_str(), MNT_DETACH);
    problem_ = fmt::format("no {} in debugfs", kprobes.string());
    return std::nullopt;
  }
  mounted_ = debug;
  spdlog::info("mounted debugfs at {} to read kprobes/list (unmounted again at exit)",
               debug.string());
  kprobes_ = kprobes;
  return kprobes_;
}

}  // namespace kpath
