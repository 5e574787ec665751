// kpathd's own cost, the way every Prometheus client library exports it (process_* metrics):
// CPU time, resident and virtual memory, open and allowed file descriptors, start time. Read from
// /proc/self, so it is the daemon's own procfs even where the host's is mounted elsewhere.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "probes/collect/collector.h"

namespace kpath {

// The fields of /proc/<pid>/stat this needs (proc(5)), in the kernel's units.
struct ProcPidStat {
  uint64_t utime_ticks = 0;       // field 14, USER_HZ
  uint64_t stime_ticks = 0;       // field 15
  int64_t num_threads = 0;        // field 20
  uint64_t start_time_ticks = 0;  // field 22, since boot
  uint64_t vsize_bytes = 0;       // field 23
  int64_t rss_pages = 0;          // field 24
};

// Parses /proc/<pid>/stat. The comm (field 2) may hold spaces and parentheses: fields are
// counted from the last ')'.
absl::StatusOr<ProcPidStat> ParseProcPidStat(std::string_view text);

// The soft "Max open files" limit from /proc/<pid>/limits; nullopt for "unlimited" or absent.
std::optional<uint64_t> ParseMaxOpenFiles(std::string_view limits_text);

class SelfProcessCollector final : public Collector {
 public:
  // `self`: /proc/self (a fixture directory in tests); `proc_stat`: /proc/stat for the boot
  // time. `ticks_per_second`: USER_HZ; `page_size`: bytes.
  SelfProcessCollector(std::filesystem::path self, std::filesystem::path proc_stat,
                       long ticks_per_second, long page_size);

  std::string_view Name() const override { return "process"; }
  absl::Status Collect(MetricFamilies& out) override;

 private:
  std::filesystem::path self_;
  std::filesystem::path proc_stat_;
  double ticks_per_second_;
  double page_size_;
  std::optional<uint64_t> boot_time_;  // read once: btime does not change
};

}  // namespace kpath
