// Slab cache sizes as the kernel writes them, parsed by pure functions so that they run against
// fixtures captured from real kernels.
//
// SLUB's /sys/kernel/slab/<cache>/ attributes used here are O(1) reads of per-node counters:
// total_objects and slabs ("<total> N0=<n> N1=<n>...", CONFIG_SLUB_DEBUG) and order ("<n>").
// The `objects` attribute and /proc/slabinfo are not: they walk every partial slab of a cache
// under its node's list_lock with IRQs off (count_partial), which is what stalled seed 001's
// host for up to 189 ms with 8 million dentries. kpathd reads the O(1) attributes only, and
// /proc/slabinfo only where there is no /sys/kernel/slab.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kpath {

// The leading number of a SLUB sysfs attribute: "53095 N0=53095\n" -> 53095, "3\n" -> 3.
absl::StatusOr<uint64_t> ParseSlabAttribute(std::string_view text);

// One line of /proc/slabinfo (version 2.x).
struct SlabinfoEntry {
  std::string name;
  uint64_t active_objects = 0;
  uint64_t objects = 0;  // num_objs: object slots in the cache's slabs
  uint64_t object_size = 0;
  uint64_t objects_per_slab = 0;
  uint64_t pages_per_slab = 0;
  uint64_t active_slabs = 0;
  uint64_t slabs = 0;  // num_slabs
};

// Parses /proc/slabinfo: the "slabinfo - version: 2.x" line, the "# name ..." header, then
// "<name> <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit>
// <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>" lines.
// InvalidArgument naming the 1-based line for anything else. Never throws.
absl::StatusOr<std::vector<SlabinfoEntry>> ParseSlabinfo(std::string_view text);

}  // namespace kpath
