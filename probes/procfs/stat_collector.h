// Samples /proc/stat for kpath_cpu_seconds_total{mode}: the sys/user balance (seed 003: system
// time at 1.5x user while a Go runtime madvised memory back after every GC), for hosts without
// node_exporter.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "probes/collect/collector.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

class StatCollector final : public Collector {
 public:
  // `ticks_per_second`: USER_HZ, the unit of /proc/stat's CPU times (sysconf(_SC_CLK_TCK)).
  StatCollector(HostPaths paths, long ticks_per_second)
      : paths_(std::move(paths)),
        ticks_per_second_(ticks_per_second > 0 ? ticks_per_second : 100) {}

  std::string_view Name() const override { return "stat"; }
  absl::Status Collect(MetricFamilies& out) override;

 private:
  HostPaths paths_;
  long ticks_per_second_;
};

}  // namespace kpath
