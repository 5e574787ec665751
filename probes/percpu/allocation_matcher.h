// Matches percpu frees to allocations from the records of the allocation log (allocation_log.h),
// read from every CPU's log in any order: the live allocations by pointer, and the bytes they hold
// by caller. Pure: no maps, no kernel (tests/unit/allocation_matcher_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kpath {

struct AllocationLogRecord {
  uint64_t stamp = 0;  // the order stamp (allocation_log.h)
  bool free = false;
  uint64_t ptr = 0;
  uint64_t caller = 0;  // allocations: the caller word (percpu.h)
  uint64_t bytes = 0;   // allocations
};

class AllocationMatcher {
 public:
  // At most `max_live` allocations are kept; beyond, they are counted in not_tracked().
  explicit AllocationMatcher(size_t max_live) : max_live_(max_live) {}

  // The records of one read of the logs, in any order (sorted here). For one pointer, an
  // allocation stamped a came before a free stamped f exactly when a <= f; a free matches the
  // live allocation of its pointer with the largest such stamp. An allocation may be read before
  // the free that came before it (that free's CPU was read first), never the other way round
  // (the reader reads frees first): so a pointer may have two live allocations for a while, and
  // a free with none before it is of memory allocated before the probe started.
  void Apply(std::vector<AllocationLogRecord>& records);

  // Bytes allocated and not freed, by caller word (entries may be 0).
  const std::unordered_map<uint64_t, int64_t>& OutstandingByCaller() const { return held_; }
  uint64_t untracked_frees() const { return untracked_frees_; }
  uint64_t not_tracked() const { return not_tracked_; }
  size_t live() const { return live_count_; }

 private:
  struct Live {
    uint64_t stamp;
    uint64_t caller;
    uint64_t bytes;
  };
  size_t max_live_;
  size_t live_count_ = 0;
  std::unordered_multimap<uint64_t, Live> live_;  // by pointer: one, or two for a while
  std::unordered_map<uint64_t, int64_t> held_;
  uint64_t untracked_frees_ = 0;
  uint64_t not_tracked_ = 0;
};

}  // namespace kpath
