#include "probes/collect/rate_bursts.h"

#include <algorithm>

#include "fmt/format.h"

namespace kpath {

std::vector<Event> RateBursts::Update(const std::map<std::string, double>& per_second,
                                      double threshold, absl::Time now) {
  std::vector<Event> events;
  const std::string key_field(names_.key_field);
  const std::string rate_field(names_.rate_field);
  for (auto it = bursts_.begin(); it != bursts_.end();) {
    auto rate = per_second.find(it->first);
    const double r = rate == per_second.end() ? 0 : rate->second;
    if (r >= threshold) {
      it->second.peak = std::max(it->second.peak, r);
      ++it;
      continue;
    }
    const double seconds = absl::ToDoubleSeconds(now - it->second.since);
    events.push_back(
        Event{std::string(names_.end_kind),
              now,
              fmt::format("{} of {} ended after {:.0f} s (peak {:.0f} {}, now {:.0f})", names_.what,
                          it->first, seconds, it->second.peak, names_.per_second, r),
              {{key_field, it->first},
               {rate_field, r},
               {"peak_" + rate_field, it->second.peak},
               {"seconds", seconds}}});
    it = bursts_.erase(it);
  }
  for (const auto& [key, rate] : per_second) {
    if (rate < threshold || threshold <= 0 || bursts_.count(key)) continue;
    bursts_[key] = Burst{now, rate};
    events.push_back(Event{std::string(names_.start_kind),
                           now,
                           fmt::format("{}: {} {:.0f} {} (threshold {:.0f})", names_.what, key,
                                       rate, names_.per_second, threshold),
                           {{key_field, key}, {rate_field, rate}, {"threshold", threshold}}});
  }
  return events;
}

}  // namespace kpath
