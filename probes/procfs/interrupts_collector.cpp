#include "probes/procfs/interrupts_collector.h"

#include <filesystem>

#include "fmt/format.h"
#include "probes/collect/metric_families.h"
#include "probes/procfs/interrupts.h"
#include "probes/procfs/procfs_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

absl::Status InterruptsCollector::Collect(MetricFamilies& out) {
  const std::filesystem::path path = paths_.Proc("interrupts");
  // A machine with thousands of CPUs and IRQs writes a few MB at most.
  absl::StatusOr<std::string> text = ReadFileToString(path, 16 << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<Interrupts> interrupts = ParseInterrupts(*text);
  if (!interrupts.ok()) {
    return absl::Status(
        interrupts.status().code(),
        fmt::format("{}: {}", path.string(), std::string(interrupts.status().message())));
  }
  std::optional<uint64_t> shootdowns = interrupts->TlbShootdowns();
  if (!shootdowns) {
    if (!logged_no_tlb_row_) {
      spdlog::info(
          "{} has no TLB row (only x86 counts TLB shootdown IPIs; arm64 invalidates with "
          "broadcast TLBI instructions): kpath_tlb_shootdowns_total is not exported",
          path.string());
      logged_no_tlb_row_ = true;
    }
    return absl::OkStatus();
  }
  FamilyBuilder(procfs_metrics::kTlbShootdownsTotal)
      .Add(static_cast<double>(*shootdowns))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
