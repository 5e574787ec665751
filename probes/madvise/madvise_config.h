// Configuration `madvise:` (madvise storms, seed 003). Applies on reload.
#pragma once

namespace kpath {

struct MadviseConfig {
  // The STATUS= line names the busiest madvise caller from this many calls per second.
  int storm_calls_per_second = 1000;
  bool operator==(const MadviseConfig&) const = default;
};

}  // namespace kpath
