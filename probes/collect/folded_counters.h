// Cumulative counters whose label values stay bounded (metrics contract: per-label top-N, the
// rest folded into "other"). Each label keeps the N values with the most recent activity (an
// exponentially decayed count of field 0). Guarantees:
//  - no phantom increments: a value that leaves the top-N (membership is sticky: a newcomer must
//    be twice as busy to displace it) ends its series; only its later increments go to the
//    "other" form, so rate()/increase() of every exported series, "other" included, count only
//    what happened in their window;
//  - exact totals: the series ended that way are kept in evicted(), by their "other" form, so the
//    sum over series() plus the sum over evicted() always equals everything ever added (an
//    `*_evicted_total` family next to each folded family; docs/metrics.md);
//  - bounded labels: every label shows at most top_n values besides "other" (so at most
//    prod(top_n[i] + 1) series, and as many evicted ones);
//  - monotonic series: a series only grows while it exists. A value that comes back into the
//    top-N starts a new series from 0 (Prometheus reads it as a counter reset: never an
//    overcount).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "probes/collect/metric_families.h"

namespace kpath {

class FoldedCounters {
 public:
  static constexpr const char* kOther = "other";

  // `labels`: label names; `top_n`: values kept per label; `fields`: counters per key (for
  // example calls and bytes). `decay`: how much of a value's activity score survives an interval.
  FoldedCounters(std::vector<std::string> labels, std::vector<size_t> top_n, size_t fields,
                 double decay = 0.9);

  void SetTopN(std::vector<size_t> top_n);

  // Adds one interval's deltas for a key (its raw label values, one per label).
  void Add(const std::vector<std::string>& values, std::span<const uint64_t> deltas);
  // Adds deltas that have no key (a full BPF map's overflow): they go to the all-"other" series.
  void AddOther(std::span<const uint64_t> deltas);
  // Ends the interval: updates activity, picks each label's top-N, folds the interval's deltas
  // into the exported series, and ends the series whose values left the top-N (their totals go
  // to evicted(), never to an exported series).
  void EndInterval();

  // Appends one sample per exported series for counter `field` (labels in constructor order).
  void AppendTo(FamilyBuilder& family, size_t field) const;
  // Appends one sample per evicted() key for counter `field`: the family's `*_evicted_total`.
  void AppendEvictedTo(FamilyBuilder& family, size_t field) const;
  // Both families of counter `field`: `live` from series(), `evicted` from evicted().
  void AppendFamilies(const MetricSpec& live, const MetricSpec& evicted, size_t field,
                      MetricFamilies& out) const;
  // The exported series: folded label values -> cumulative value per field.
  const std::map<std::vector<std::string>, std::vector<uint64_t>>& series() const {
    return series_;
  }
  // The totals of ended series, by the "other" form of their key: only grows.
  const std::map<std::vector<std::string>, std::vector<uint64_t>>& evicted() const {
    return evicted_;
  }
  uint64_t total(size_t field) const { return totals_.at(field); }
  size_t budget() const;
  // The label value with the most activity in the last intervals (for STATUS lines), or "".
  std::string TopValue(size_t label) const;

 private:
  std::vector<std::string> Fold(const std::vector<std::string>& values) const;
  void Evict();

  std::vector<std::string> labels_;
  bool mismatch_logged_ = false;  // Add() with a wrong number of values, said once
  std::vector<size_t> top_n_;
  size_t fields_;
  double decay_;
  uint64_t interval_ = 0;
  std::vector<uint64_t> totals_;
  // Per label: value -> decayed activity.
  std::vector<std::unordered_map<std::string, double>> activity_;
  // Per label: the values currently exported as themselves.
  std::vector<std::unordered_map<std::string, bool>> selected_;
  // This interval's raw deltas, folded at EndInterval.
  std::map<std::vector<std::string>, std::vector<uint64_t>> pending_;
  std::map<std::vector<std::string>, std::vector<uint64_t>> series_;
  std::map<std::vector<std::string>, std::vector<uint64_t>> evicted_;
  std::map<std::vector<std::string>, uint64_t> last_update_;
};

}  // namespace kpath
