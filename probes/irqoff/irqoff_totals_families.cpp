#include "probes/irqoff/irqoff_totals_families.h"

#include <algorithm>
#include <string>

#include "probes/irqoff/irqoff_metrics.h"

namespace kpath {

namespace {
constexpr uint64_t kBucketBoundsUs[IRQOFF_BUCKETS] = IRQOFF_BUCKET_BOUNDS_US;
}  // namespace

void AddRegionHistogram(const LabelPairs& labels, const irqoff_totals& totals,
                        FamilyBuilder& family) {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  for (size_t b = 0; b < IRQOFF_BUCKETS; ++b) {
    bounds.push_back(static_cast<double>(kBucketBoundsUs[b]) / 1e6);
    counts.push_back(totals.buckets[b]);
  }
  counts.push_back(totals.buckets[IRQOFF_BUCKETS]);
  family.AddHistogram(labels, bounds, counts, static_cast<double>(totals.region_ns) / 1e9);
}

void AppendPerCpuFamilies(std::span<const irqoff_totals> per_cpu, const std::vector<int>& online,
                          MetricFamilies& out) {
  FamilyBuilder regions(irqoff_metrics::kCpuRegionsTotal);
  FamilyBuilder seconds(irqoff_metrics::kCpuRegionSecondsTotal);
  for (size_t cpu = 0; cpu < per_cpu.size(); ++cpu) {
    const irqoff_totals& totals = per_cpu[cpu];
    if (totals.regions == 0 &&
        !std::binary_search(online.begin(), online.end(), static_cast<int>(cpu))) {
      continue;
    }
    LabelPairs labels{{"cpu", std::to_string(cpu)}};
    regions.Add(labels, static_cast<double>(totals.regions));
    seconds.Add(labels, static_cast<double>(totals.region_ns) / 1e9);
  }
  regions.AppendTo(out);
  seconds.AppendTo(out);
}

}  // namespace kpath
