// The growth rate of a sampled quantity (Percpu bytes, cgroups created) as the ordinary
// least-squares slope over a sliding time window. Least squares rather than (last - first) / dt:
// one odd sample at either end of the window moves the slope a little instead of setting it.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>

#include "absl/time/time.h"

namespace kpath {

class WindowedSlope {
 public:
  explicit WindowedSlope(absl::Duration window) : window_(window) {}

  // Records `value` at `t` and drops the samples older than `t - window`. A `t` before the newest
  // sample means the clock stepped back: the earlier samples are discarded, since their spacing
  // relative to the new ones is unknown. Infinite times and non-finite values are ignored.
  void Add(absl::Time t, double value);

  // Units of value per second over the samples kept; nullopt with fewer than two samples or when
  // all of them have the same time.
  std::optional<double> PerSecond() const;

  // Takes effect at once: samples outside the new window (counted back from the newest sample)
  // are dropped. A window <= 0 keeps only the newest sample.
  void SetWindow(absl::Duration window);
  absl::Duration window() const { return window_; }

  size_t size() const { return samples_.size(); }
  void Clear() { samples_.clear(); }

 private:
  struct Sample {
    absl::Time t;
    double value;
  };

  void Evict();

  absl::Duration window_;
  std::deque<Sample> samples_;  // ascending t
};

}  // namespace kpath
