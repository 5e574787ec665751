// Configuration of percpu allocations (seed 000): `percpu:` and the growth window under
// `meminfo:`. max_tracked_allocations and caller_from_stack take a restart (they size and compile
// the BPF programs); the growth window applies on reload.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace kpath {

struct PercpuConfig {
  // meminfo.percpu_growth_window: the window of the Percpu growth rate, and of the cgroup churn
  // rate (so that Percpu growth / churn reads as bytes per cgroup creation).
  absl::Duration growth_window = absl::Seconds(60);
  // Live percpu allocations remembered until their free (for outstanding bytes by caller).
  uint32_t max_tracked_allocations = 65536;
  // Name percpu callers from kernel stack samples even where the tracepoint has call_site.
  bool caller_from_stack = false;
  bool operator==(const PercpuConfig&) const = default;
};

}  // namespace kpath
