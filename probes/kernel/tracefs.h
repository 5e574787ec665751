// tracefs: where it is (mounting it when allowed), and the layout of a classic tracepoint from
// its events/<category>/<event>/format file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

// One field of a classic tracepoint, from events/<category>/<event>/format.
struct TracepointField {
  std::string name;  // "bytes_alloc"
  std::string type;  // "size_t"
  uint32_t offset = 0;
  uint32_t size = 0;
  bool is_signed = false;
};

struct TracepointFormat {
  std::string name;                     // "percpu_alloc_percpu"
  uint32_t id = 0;                      // perf event id
  std::vector<TracepointField> fields;  // common_* fields included
  const TracepointField* Find(std::string_view field) const;
};

// Pure parser of a tracefs `format` file (any kernel since 3.x).
absl::StatusOr<TracepointFormat> ParseTracepointFormat(std::string_view text);

// Event and category names become path components: false for anything that could leave events/.
bool IsSafeTracepointName(std::string_view name);

// The tracefs root with an events/ directory: <sysfs>/kernel/tracing, else
// <sysfs>/kernel/debug/tracing. When neither has one and `may_mount`, mounts tracefs at the
// first and sets `*mounted` to it (also when the mount then turns out useless), so the caller
// unmounts it at exit with UnmountTracefs.
absl::StatusOr<std::filesystem::path> FindOrMountTracefs(const HostPaths& paths, bool may_mount,
                                                         std::filesystem::path* mounted);
void UnmountTracefs(const std::filesystem::path& mounted);

// The parsed format of <tracefs>/events/<category>/<event>/format; NotFound when the kernel
// lacks that event.
absl::StatusOr<TracepointFormat> ReadTracepointFormat(const std::filesystem::path& tracefs,
                                                      std::string_view category,
                                                      std::string_view event);

// Every event under <tracefs>/events, by its name: "sched_switch" -> "sched:sched_switch". An
// event name found in two categories keeps the first category in name order. Never throws.
std::map<std::string, std::string, std::less<>> QualifiedTracepointNames(
    const std::filesystem::path& tracefs);

}  // namespace kpath
