// Slab cache sizes (seed 001): objects and bytes of the configured caches plus the largest
// others, read the cheapest way the kernel offers, slowly, timed, and backing off when a read is
// slow, so that kpathd can never become the `ss` of seed 001 (see slab_files.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "probes/collect/collector.h"
#include "probes/kernel/host_paths.h"
#include "probes/slab/slab_config.h"
#include "probes/slab/slab_files.h"

namespace kpath {

// One cache as exported.
struct SlabCacheSize {
  std::string name;
  uint64_t objects = 0;  // object slots in its slabs (SLUB total_objects, slabinfo num_objs)
  uint64_t bytes = 0;    // memory of its slabs: slabs x (page size << order)
};

// Where the numbers came from.
enum class SlabSource { kSysfs, kSlabinfo };
std::string_view SlabSourceName(SlabSource source);

struct SlabReading {
  SlabSource source = SlabSource::kSysfs;
  std::vector<SlabCacheSize> listed;  // the configured caches the kernel has, in config order
  std::vector<SlabCacheSize> top;     // the largest others by objects, largest first
};

// Reads SLUB's /sys/kernel/slab: the listed caches by name (through alias symlinks: a merged
// cache reports the totals of everything merged into it), then, for the top N, total_objects of
// every cache directory. A merged cache's directory (":a-0000104") is named after the first of
// its aliases in sort order. Stops and fails once `deadline` has passed.
absl::StatusOr<SlabReading> ReadSlabSysfs(const HostPaths& paths,
                                          const std::vector<std::string>& caches, size_t top_n,
                                          uint64_t page_size,
                                          std::chrono::steady_clock::time_point deadline);

// Picks the listed caches and the top N out of a parsed /proc/slabinfo.
SlabReading SlabReadingFromSlabinfo(const std::vector<SlabinfoEntry>& entries,
                                    const std::vector<std::string>& caches, size_t top_n,
                                    uint64_t page_size);

// Reads /proc/slabinfo in small pieces, giving up once `deadline` has passed (each piece is a
// few caches' worth of the kernel's walk).
absl::StatusOr<std::string> ReadSlabinfoText(const HostPaths& paths,
                                             std::chrono::steady_clock::time_point deadline);

class SlabCollector final : public Collector {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr int kMaxBackoff = 64;

  SlabCollector(HostPaths paths, SlabConfig config, Clock clock = std::chrono::steady_clock::now);

  std::string_view Name() const override { return "slab"; }
  absl::Status Collect(MetricFamilies& out) override;

  // On reload; the next read happens on the new interval.
  void SetConfig(SlabConfig config);

  // The current multiple of `interval` between reads (1 when reads are fast).
  int backoff() const { return backoff_; }

 private:
  absl::StatusOr<SlabReading> Read(std::chrono::steady_clock::time_point deadline);

  HostPaths paths_;
  SlabConfig config_;
  Clock clock_;
  uint64_t page_size_;
  int backoff_ = 1;
  std::optional<std::chrono::steady_clock::time_point> next_read_;
  std::optional<SlabReading> last_;
  std::optional<absl::Status> last_error_;
  double last_read_seconds_ = 0;
  SlabSource last_source_ = SlabSource::kSysfs;
  bool logged_source_ = false;
};

}  // namespace kpath
