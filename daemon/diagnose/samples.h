// diagnose's view of a collection: the samples of each metric family by catalogue entry, and the
// sums, growths and rankings the rules read off two collections (the start and the end of the
// watch).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "probes/collect/metric_families.h"

namespace kpath::diagnose {

using Labels = std::map<std::string, std::string>;

struct Sample {
  Labels labels;
  double value = 0;
};

// The samples of a collection by metric name; histograms are left out (diagnose reads their
// companion counters and gauges).
class Samples {
 public:
  explicit Samples(const MetricFamilies& families);

  bool Has(const MetricSpec& family) const { return by_name_.count(family.name) != 0; }
  const std::vector<Sample>& Get(const MetricSpec& family) const;
  // The first sample whose labels include every pair of `match`.
  std::optional<double> Value(const MetricSpec& family, const Labels& match = {}) const;

 private:
  std::map<std::string, std::vector<Sample>, std::less<>> by_name_;
};

using Key = std::vector<std::string>;
using Groups = std::map<Key, double>;

// Sum of `family` by the values of the labels `keys`, over samples that `keep` accepts.
template <typename Keep>
Groups SumBy(const Samples& samples, const MetricSpec& family, const std::vector<std::string>& keys,
             Keep keep) {
  Groups out;
  for (const Sample& s : samples.Get(family)) {
    if (!keep(s.labels)) continue;
    Key k;
    for (const std::string& name : keys) {
      auto it = s.labels.find(name);
      k.push_back(it == s.labels.end() ? "" : it->second);
    }
    out[k] += s.value;
  }
  return out;
}

inline Groups SumBy(const Samples& samples, const MetricSpec& family,
                    const std::vector<std::string>& keys) {
  return SumBy(samples, family, keys, [](const Labels&) { return true; });
}

// How much each group grew between two collections (counters start at 0 when a probe attaches,
// so a group missing at the start counts from 0).
Groups Growth(const Groups& first, const Groups& last);

double Total(const Groups& groups);

// The groups with the largest positive values, largest first.
std::vector<std::pair<Key, double>> Top(const Groups& groups, size_t n);

}  // namespace kpath::diagnose
