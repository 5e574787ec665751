#include "probes/madvise/madvise_storms.h"

#include <algorithm>

#include "fmt/format.h"

namespace kpath {

std::vector<Event> MadviseStorms::Update(const std::map<std::string, double>& calls_per_second,
                                         double threshold, absl::Time now) {
  std::vector<Event> events;
  for (auto it = storms_.begin(); it != storms_.end();) {
    auto rate = calls_per_second.find(it->first);
    const double r = rate == calls_per_second.end() ? 0 : rate->second;
    if (r >= threshold) {
      it->second.peak = std::max(it->second.peak, r);
      ++it;
      continue;
    }
    const double seconds = absl::ToDoubleSeconds(now - it->second.since);
    events.push_back(Event{
        std::string(event_kind::kMadviseStormEnd),
        now,
        fmt::format("madvise storm of {} ended after {:.0f} s (peak {:.0f} calls/s, now {:.0f})",
                    it->first, seconds, it->second.peak, r),
        {{"comm", it->first},
         {"calls_per_second", r},
         {"peak_calls_per_second", it->second.peak},
         {"seconds", seconds}}});
    it = storms_.erase(it);
  }
  for (const auto& [comm, rate] : calls_per_second) {
    if (rate < threshold || threshold <= 0 || storms_.count(comm)) continue;
    storms_[comm] = Storm{now, rate};
    events.push_back(Event{
        std::string(event_kind::kMadviseStormStart),
        now,
        fmt::format("madvise storm: {} {:.0f} calls/s (threshold {:.0f})", comm, rate, threshold),
        {{"comm", comm}, {"calls_per_second", rate}, {"threshold", threshold}}});
  }
  return events;
}

}  // namespace kpath
