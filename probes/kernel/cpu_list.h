// sysfs CPU range lists: /sys/devices/system/cpu/{possible,online}.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kpath {

// Pure parser of a sysfs CPU range list ("0-39", "0,2-5", "" for an empty mask). Returns the CPU
// numbers, sorted and unique.
absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text);

// The CPU list in a sysfs file.
absl::StatusOr<std::vector<int>> ReadCpuList(const std::filesystem::path& path);

}  // namespace kpath
