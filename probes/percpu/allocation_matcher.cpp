#include "probes/percpu/allocation_matcher.h"

#include <algorithm>
#include <tuple>

namespace kpath {

void AllocationMatcher::Apply(std::vector<AllocationLogRecord>& records) {
  // By stamp; an allocation before a free of the same stamp (it read the stamp before that free
  // took it).
  std::sort(records.begin(), records.end(),
            [](const AllocationLogRecord& a, const AllocationLogRecord& b) {
              return std::tie(a.stamp, a.free) < std::tie(b.stamp, b.free);
            });
  for (const AllocationLogRecord& r : records) {
    if (!r.free) {
      if (live_count_ >= max_live_) {
        ++not_tracked_;
        continue;
      }
      live_.emplace(r.ptr, Live{r.stamp, r.caller, r.bytes});
      ++live_count_;
      held_[r.caller] += static_cast<int64_t>(r.bytes);
      continue;
    }
    auto [first, last] = live_.equal_range(r.ptr);
    auto match = live_.end();
    for (auto a = first; a != last; ++a) {
      if (a->second.stamp <= r.stamp &&
          (match == live_.end() || a->second.stamp > match->second.stamp)) {
        match = a;
      }
    }
    if (match == live_.end()) {
      // Allocated before the probe started (or its allocation was not tracked).
      ++untracked_frees_;
      continue;
    }
    held_[match->second.caller] -= static_cast<int64_t>(match->second.bytes);
    live_.erase(match);
    --live_count_;
  }
}

}  // namespace kpath
