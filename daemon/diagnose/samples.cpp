#include "daemon/diagnose/samples.h"

#include <algorithm>

namespace kpath::diagnose {

Samples::Samples(const MetricFamilies& families) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.type == prometheus::MetricType::Histogram || f.type == prometheus::MetricType::Summary) {
      continue;
    }
    std::vector<Sample>& out = by_name_[f.name];
    for (const prometheus::ClientMetric& m : f.metric) {
      Sample s;
      for (const auto& l : m.label) s.labels[l.name] = l.value;
      switch (f.type) {
        case prometheus::MetricType::Counter:
          s.value = m.counter.value;
          break;
        case prometheus::MetricType::Gauge:
          s.value = m.gauge.value;
          break;
        default:
          s.value = m.untyped.value;
          break;
      }
      out.push_back(std::move(s));
    }
  }
}

const std::vector<Sample>& Samples::Get(const MetricSpec& family) const {
  static const std::vector<Sample> kNone;
  auto it = by_name_.find(family.name);
  return it == by_name_.end() ? kNone : it->second;
}

std::optional<double> Samples::Value(const MetricSpec& family, const Labels& match) const {
  auto matches = [&](const Labels& labels) {
    for (const auto& [k, v] : match) {
      auto it = labels.find(k);
      if (it == labels.end() || it->second != v) return false;
    }
    return true;
  };
  for (const Sample& s : Get(family))
    if (matches(s.labels)) return s.value;
  return std::nullopt;
}

Groups Growth(const Groups& first, const Groups& last) {
  Groups out;
  for (const auto& [k, v] : last) {
    auto it = first.find(k);
    out[k] = v - (it == first.end() ? 0 : it->second);
  }
  return out;
}

double Total(const Groups& groups) {
  double t = 0;
  for (const auto& [k, v] : groups) t += v;
  return t;
}

std::vector<std::pair<Key, double>> Top(const Groups& groups, size_t n) {
  std::vector<std::pair<Key, double>> v;
  for (const auto& [k, value] : groups)
    if (value > 0) v.emplace_back(k, value);
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > n) v.resize(n);
  return v;
}

}  // namespace kpath::diagnose
