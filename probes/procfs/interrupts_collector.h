// Samples /proc/interrupts for kpath_tlb_shootdowns_total (seed 003: MADV_DONTNEED storms force
// TLB shootdown IPIs on every CPU that runs the process). Only x86 counts shootdowns there; on
// other architectures the row is absent and so is the metric (logged once).
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "probes/collect/collector.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

class InterruptsCollector final : public Collector {
 public:
  explicit InterruptsCollector(HostPaths paths) : paths_(std::move(paths)) {}

  std::string_view Name() const override { return "interrupts"; }
  absl::Status Collect(MetricFamilies& out) override;

 private:
  HostPaths paths_;
  bool logged_no_tlb_row_ = false;
};

}  // namespace kpath
