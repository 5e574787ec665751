// Bursts of a per-key rate as events (issue 22): a key (a process, a unit) whose rate reaches a
// threshold in a sampling interval starts a burst; the first interval it falls below ends it.
// madvise storms (a process's madvise calls) and cgroup churn bursts (a unit's cgroups made) are
// the same rule on two rates, so one class serves both; only the names differ.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "probes/collect/event_sink.h"

namespace kpath {

// What a kind of burst is called in its events.
struct RateBurstNames {
  std::string_view start_kind;  // event_kind::*
  std::string_view end_kind;
  std::string_view what;        // "madvise storm": the messages' subject
  std::string_view key_field;   // "comm": the key's field
  std::string_view rate_field;  // "calls_per_second": the rate's field (and "peak_" it)
  std::string_view per_second;  // "calls/s": the rate's unit in messages
};

// madvise storms: by process, madvise.storm_calls_per_second.
inline constexpr RateBurstNames kMadviseStorms{event_kind::kMadviseStormStart,
                                               event_kind::kMadviseStormEnd,
                                               "madvise storm",
                                               "comm",
                                               "calls_per_second",
                                               "calls/s"};
// cgroup churn bursts: by systemd unit, cgroups.churn_burst_per_second.
inline constexpr RateBurstNames kCgroupChurnBursts{event_kind::kCgroupChurnBurstStart,
                                                   event_kind::kCgroupChurnBurstEnd,
                                                   "cgroup churn burst",
                                                   "unit",
                                                   "mkdirs_per_second",
                                                   "cgroups/s"};

class RateBursts {
 public:
  explicit RateBursts(const RateBurstNames& names) : names_(names) {}

  // One interval's rate by key (those absent had none), ending at `now`: a start event for each
  // key at or above `threshold` not already in a burst (key, rate, threshold), an end event for
  // each one in a burst now below it (key, rate, peak rate, seconds since it started). A
  // threshold of 0 or less starts none.
  std::vector<Event> Update(const std::map<std::string, double>& per_second, double threshold,
                            absl::Time now);

 private:
  struct Burst {
    absl::Time since;
    double peak = 0;
  };
  RateBurstNames names_;
  std::map<std::string, Burst> bursts_;  // bounded as the keys of one interval are
};

}  // namespace kpath
