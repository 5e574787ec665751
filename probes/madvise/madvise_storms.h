// madvise storms as events (issue 22): a process whose madvise calls reach the storm threshold
// (madvise.storm_calls_per_second, the rate STATUS= names a storm from) in a sampling interval
// starts a storm; the first interval it falls below ends it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "probes/collect/event_sink.h"

namespace kpath {

class MadviseStorms {
 public:
  // One interval's calls per second by process (those absent made none), ending at `now`:
  // madvise_storm_start for each process at or above `threshold` not already in a storm
  // (comm, calls_per_second, threshold), madvise_storm_end for each one in a storm now below it
  // (comm, calls_per_second, peak_calls_per_second, seconds since it started).
  std::vector<Event> Update(const std::map<std::string, double>& calls_per_second, double threshold,
                            absl::Time now);

 private:
  struct Storm {
    absl::Time since;
    double peak = 0;
  };
  std::map<std::string, Storm> storms_;  // bounded as the processes of one interval are
};

}  // namespace kpath
