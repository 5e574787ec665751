// Test support: creates and removes memory cgroups, the seed-000 workload, and leaves none behind.
#pragma once

#include <optional>
#include <string>

namespace kpath::testing {

// The mount point of the hierarchy that has the memory controller: cgroup v1 `memory`, or the
// cgroup2 root when its cgroup.controllers lists memory. nullopt if neither is mounted.
std::optional<std::string> MemoryCgroupRoot();

// mkdir + rmdir of `count` child cgroups named <prefix>-<i> under `parent`. Returns how many
// pairs succeeded. Removes anything it created, also on failure.
int ChurnCgroups(const std::string& parent, const std::string& prefix, int count);

}  // namespace kpath::testing
