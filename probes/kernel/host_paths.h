// Every /proc and /sys path kpathd reads goes through HostPaths, so that each parser and
// collector runs against fixture trees in tests (--procfs-root, --sysfs-root), as
// node_exporter's --path.procfs does.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kpath {

class HostPaths {
 public:
  HostPaths() : HostPaths("/proc", "/sys") {}
  HostPaths(std::filesystem::path procfs, std::filesystem::path sysfs)
      : procfs_(std::move(procfs)), sysfs_(std::move(sysfs)) {}

  // Proc("meminfo") -> <procfs-root>/meminfo
  std::filesystem::path Proc(std::string_view rel) const { return procfs_ / rel; }
  std::filesystem::path Sys(std::string_view rel) const { return sysfs_ / rel; }
  const std::filesystem::path& procfs_root() const { return procfs_; }
  const std::filesystem::path& sysfs_root() const { return sysfs_; }

 private:
  std::filesystem::path procfs_;
  std::filesystem::path sysfs_;
};

// Whether a path exists / is a directory; false on any error (never throws).
bool PathExists(const std::filesystem::path& path);
bool IsDirectory(const std::filesystem::path& path);

// Reads a whole (pseudo-)file. /proc files report size 0, so this reads until EOF. The error
// names the path and errno text. `max_bytes` bounds what a garbled or hostile file can cost.
absl::StatusOr<std::string> ReadFileToString(const std::filesystem::path& path,
                                             size_t max_bytes = 64 << 20);

}  // namespace kpath
