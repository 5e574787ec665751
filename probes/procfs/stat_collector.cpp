#include "probes/procfs/stat_collector.h"

#include <filesystem>
#include <string>

#include "fmt/format.h"
#include "probes/collect/metric_families.h"
#include "probes/procfs/procfs_metrics.h"
#include "probes/procfs/stat.h"

namespace kpath {

absl::Status StatCollector::Collect(MetricFamilies& out) {
  const std::filesystem::path path = paths_.Proc("stat");
  // The intr line lists every IRQ number: large on big machines, still far below this.
  absl::StatusOr<std::string> text = ReadFileToString(path, 16 << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<ProcStat> stat = ParseProcStat(*text);
  if (!stat.ok()) {
    return absl::Status(stat.status().code(),
                        fmt::format("{}: {}", path.string(), std::string(stat.status().message())));
  }
  FamilyBuilder seconds(procfs_metrics::kCpuSecondsTotal);
  for (size_t m = 0; m < stat->total.modes; ++m) {
    seconds.Add({{"mode", std::string(kCpuModes[m])}},
                static_cast<double>(stat->total.ticks[m]) / static_cast<double>(ticks_per_second_));
  }
  seconds.AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
