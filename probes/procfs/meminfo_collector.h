// Samples /proc/meminfo: every kB field as kpath_meminfo_bytes{field}, Percpu on its own and its
// growth rate (seed 000: Percpu creeping up a few hundred KiB every few seconds).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "probes/collect/collector.h"
#include "probes/collect/growth_rate.h"
#include "probes/collect/human_units.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

class MeminfoCollector final : public Collector {
 public:
  using Clock = std::function<absl::Time()>;

  // `growth_window`: how far back kpath_percpu_growth_bytes_per_second looks. `clock` stamps each
  // sample (tests inject one).
  MeminfoCollector(HostPaths paths, absl::Duration growth_window, Clock clock = absl::Now);

  std::string_view Name() const override { return "meminfo"; }
  absl::Status Collect(MetricFamilies& out) override;
  // "Percpu 1.8 GiB +340 KiB/s"; without the rate before two samples; empty when the last
  // collection failed or the kernel has no Percpu field.
  std::string StatusFragment() const override;

  // On config reload; samples outside the new window are dropped at once.
  void SetGrowthWindow(absl::Duration window) { percpu_growth_.SetWindow(window); }

 private:
  HostPaths paths_;
  Clock clock_;
  WindowedSlope percpu_growth_;
  std::optional<uint64_t> percpu_bytes_;  // from the last successful collection
  std::optional<double> percpu_bytes_per_second_;
  bool warned_no_percpu_ = false;
};

}  // namespace kpath
