#include "probes/collect/metric_families.h"

#include <limits>

#include "probes/collect/label_values.h"

namespace kpath {

FamilyBuilder::FamilyBuilder(std::string name, std::string help, prometheus::MetricType type) {
  family_.name = std::move(name);
  family_.help = std::move(help);
  family_.type = type;
}

namespace {
prometheus::MetricType PrometheusType(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return prometheus::MetricType::Counter;
    case MetricType::kGauge:
      return prometheus::MetricType::Gauge;
    case MetricType::kHistogram:
      return prometheus::MetricType::Histogram;
  }
  return prometheus::MetricType::Untyped;
}

prometheus::ClientMetric WithLabels(const LabelPairs& labels) {
  prometheus::ClientMetric m;
  m.label.reserve(labels.size());
  for (const auto& [k, v] : labels) m.label.push_back({k, SanitizeLabelValue(v)});
  return m;
}
}  // namespace

FamilyBuilder::FamilyBuilder(const MetricSpec& spec)
    : FamilyBuilder(std::string(spec.name), std::string(spec.help), PrometheusType(spec.type)) {}

FamilyBuilder& FamilyBuilder::Add(const LabelPairs& labels, double value) {
  prometheus::ClientMetric m = WithLabels(labels);
  switch (family_.type) {
    case prometheus::MetricType::Counter:
      m.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      m.gauge.value = value;
      break;
    default:
      m.untyped.value = value;
      break;
  }
  family_.metric.push_back(std::move(m));
  return *this;
}

FamilyBuilder& FamilyBuilder::AddHistogram(const LabelPairs& labels,
                                           const std::vector<double>& upper_bounds,
                                           const std::vector<uint64_t>& bucket_counts, double sum) {
  prometheus::ClientMetric m = WithLabels(labels);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    cumulative += i < bucket_counts.size() ? bucket_counts[i] : 0;
    m.histogram.bucket.push_back({cumulative, upper_bounds[i]});
  }
  if (bucket_counts.size() > upper_bounds.size()) cumulative += bucket_counts.back();
  // The text format requires the +Inf bucket; prometheus-cpp prints it from this entry.
  m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = sum;
  family_.metric.push_back(std::move(m));
  return *this;
}

void FamilyBuilder::AppendTo(MetricFamilies& out) {
  out.push_back(std::move(family_));
  family_.metric.clear();
}

}  // namespace kpath
