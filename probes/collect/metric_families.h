// Small helpers to build prometheus-cpp MetricFamily values: collectors export kernel-sourced
// totals, which prometheus-cpp's own Counter cannot be set to, so every collector builds families
// from its latest reading and the daemon serves them through one Collectable. Each family's
// name, type and HELP text is a MetricSpec declared once in the catalogue: the
// <pathology>_metrics.h next to its collector, or probes/collect/health_metrics.h for the families
// every probe shares.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prometheus/metric_family.h"

namespace kpath {

using MetricFamilies = std::vector<prometheus::MetricFamily>;
using LabelPairs = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// One metric family of the catalogue: what docs/metrics.md documents and /metrics serves.
struct MetricSpec {
  std::string_view name;
  std::string_view help;
  MetricType type;
};

class FamilyBuilder {
 public:
  FamilyBuilder(std::string name, std::string help, prometheus::MetricType type);
  explicit FamilyBuilder(const MetricSpec& spec);

  // Adds one sample (gauge, counter or untyped value, by the family's type).
  FamilyBuilder& Add(const LabelPairs& labels, double value);
  FamilyBuilder& Add(double value) { return Add(LabelPairs{}, value); }
  // Adds a histogram sample from per-bucket (non-cumulative) counts; bounds ascending, +Inf
  // implied by the last count when counts.size() == bounds.size() + 1.
  FamilyBuilder& AddHistogram(const LabelPairs& labels, const std::vector<double>& upper_bounds,
                              const std::vector<uint64_t>& bucket_counts, double sum);

  bool empty() const { return family_.metric.empty(); }
  // Appends the family to `out` (also when it has no samples: HELP/TYPE lines are harmless and
  // keep the exposition stable) and leaves the builder empty.
  void AppendTo(MetricFamilies& out);

 private:
  prometheus::MetricFamily family_;
};

inline FamilyBuilder Gauge(std::string name, std::string help) {
  return FamilyBuilder(std::move(name), std::move(help), prometheus::MetricType::Gauge);
}
inline FamilyBuilder Counter(std::string name, std::string help) {
  return FamilyBuilder(std::move(name), std::move(help), prometheus::MetricType::Counter);
}
inline FamilyBuilder Histogram(std::string name, std::string help) {
  return FamilyBuilder(std::move(name), std::move(help), prometheus::MetricType::Histogram);
}

}  // namespace kpath
