// debugfs at <sysfs>/kernel/debug, where kprobes/list and kprobes/enabled live. Mounted when
// absent and allowed (only on the real /sys, never in a fixture tree), and unmounted again on
// destruction if this object mounted it; if the mounted debugfs has no kprobes/ (a kernel
// without CONFIG_KPROBES) it is unmounted at once, leaving the host as it was.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "probes/kernel/host_paths.h"

namespace kpath {

class DebugfsMount {
 public:
  DebugfsMount(HostPaths paths, bool may_mount);
  ~DebugfsMount();
  DebugfsMount(const DebugfsMount&) = delete;
  DebugfsMount& operator=(const DebugfsMount&) = delete;

  // <sysfs>/kernel/debug/kprobes, if it exists (mounting debugfs the first time if needed);
  // otherwise nullopt and why in `problem()`. Asked once, then cached.
  std::optional<std::filesystem::path> KprobesDir();
  const std::string& problem() const { return problem_; }

 private:
  HostPaths paths_;
  bool may_mount_;
  bool tried_ = false;
  std::optional<std::filesystem::path> kprobes_;
  std::string problem_;
  std::filesystem::path mounted_;  // non-empty while this object has debugfs mounted there
};

}  // namespace kpath
