#include "probes/collect/windowed_max.h"

#include <cmath>

namespace kpath {

void WindowedMax::Add(absl::Time t, double value) {
  if (t == absl::InfiniteFuture() || t == absl::InfinitePast() || !std::isfinite(value)) return;
  if (!samples_.empty() && t < samples_.back().t) samples_.clear();
  while (!samples_.empty() && samples_.back().value <= value) samples_.pop_back();
  samples_.push_back({t, value});
  if (window_ <= absl::ZeroDuration()) {
    samples_.erase(samples_.begin(), samples_.end() - 1);
    return;
  }
  while (samples_.front().t <= t - window_) samples_.pop_front();
}

}  // namespace kpath
