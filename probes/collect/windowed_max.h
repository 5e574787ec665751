// The largest of the values sampled over a sliding time window (the IRQ-off maximum). Each sample
// is the maximum of one sampling interval; the exported value must stay up for at least one scrape
// interval, or a scraper that comes every 15-60 s misses most of the per-interval maxima.
#pragma once

#include <deque>

#include "absl/time/time.h"

namespace kpath {

// Samples are (time, value) from one clock; the clock is the caller's, so tests use a fake one.
// Same clock rules as WindowedSlope (growth_rate.h): a step back restarts, junk is ignored.
class WindowedMax {
 public:
  // The largest value recorded in (newest - window, newest], 0 when none. A window <= 0 keeps
  // only the newest sample.
  double Max() const { return samples_.empty() ? 0 : samples_.front().value; }
  // One sampling interval's maximum, taken at `t`; forgets what is `window` or more older.
  void Add(absl::Time t, double value);

  explicit WindowedMax(absl::Duration window) : window_(window) {}

  absl::Duration window() const { return window_; }
  // Samples kept: a decreasing run, so at most one per sample in the window.
  size_t size() const { return samples_.size(); }

 private:
  struct Sample {
    absl::Time t;
    double value;
  };
  absl::Duration window_;
  // Monotonic queue: values strictly decreasing from front to back, times increasing. A sample
  // that a later, larger one outlives can never be the maximum again, so it is dropped at once.
  std::deque<Sample> samples_;
};

}  // namespace kpath
