#include "probes/collect/growth_rate.h"

#include <cmath>

namespace kpath {

void WindowedSlope::Add(absl::Time t, double value) {
  if (t == absl::InfiniteFuture() || t == absl::InfinitePast() || !std::isfinite(value)) return;
  if (!samples_.empty() && t < samples_.back().t) samples_.clear();
  samples_.push_back({t, value});
  Evict();
}

void WindowedSlope::SetWindow(absl::Duration window) {
  window_ = window;
  Evict();
}

void WindowedSlope::Evict() {
  if (samples_.empty()) return;
  const absl::Time newest = samples_.back().t;
  if (window_ <= absl::ZeroDuration()) {
    samples_.erase(samples_.begin(), samples_.end() - 1);
    return;
  }
  while (samples_.front().t < newest - window_) samples_.pop_front();
}

std::optional<double> WindowedSlope::PerSecond() const {
  if (samples_.size() < 2) return std::nullopt;
  // Times as seconds since the first sample, so that the sums do not add up large epoch values;
  // then two passes (means first, centred sums second), which keeps the cancellation small even
  // for values near 2^40 bytes that change by a few KiB.
  const absl::Time t0 = samples_.front().t;
  const double n = static_cast<double>(samples_.size());
  double mean_x = 0;
  double mean_y = 0;
  for (const Sample& s : samples_) {
    mean_x += absl::ToDoubleSeconds(s.t - t0);
    mean_y += s.value;
  }
  mean_x /= n;
  mean_y /= n;
  double sxx = 0;
  double sxy = 0;
  for (const Sample& s : samples_) {
    const double dx = absl::ToDoubleSeconds(s.t - t0) - mean_x;
    sxx += dx * dx;
    sxy += dx * (s.value - mean_y);
  }
  if (!(sxx > 0)) return std::nullopt;
  return sxy / sxx;
}

}  // namespace kpath
