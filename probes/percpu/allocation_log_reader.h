// Reads the percpu allocation log (allocation_log.h) of a loaded percpu object into an
// AllocationMatcher: on its own thread every `interval`, so that a log never fills between two
// collections, and on demand before each collection, so that the figures a collection exports
// include everything logged before it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "probes/collect/bpf_maps.h"
#include "probes/percpu/allocation_matcher.h"

struct bpf_map;

namespace kpath {

// Records per CPU in each log, as a power of two: `wanted_bits`, or fewer where the CPUs are many,
// so that each log holds at most kAllocationLogBudget records over all CPUs (2.5 MiB of locked map
// memory for both logs: 24 bytes an allocation, 16 a free), and at least 64 a CPU. A CPU's log
// is read every 50 ms, and a burst beyond it spills into the spill map, so a smaller log costs
// spill-map updates, not counts. 2 CPUs: 4096 each; 64: 1024; 256: 256; 4096: 64.
inline constexpr uint32_t kAllocationLogBudget = uint32_t{1} << 16;
constexpr uint32_t AllocationLogBits(uint32_t cpus, uint32_t wanted_bits) {
  uint32_t bits = wanted_bits < 6 ? 6 : (wanted_bits > 20 ? 20 : wanted_bits);
  while (bits > 6 && (uint64_t{cpus} << bits) > kAllocationLogBudget) --bits;
  return bits;
}

// When the reader reads next, after a read `waited` after the one before found the fullest log
// `fullest` full (0..1, over both logs of every CPU): `interval`, or sooner so that a log is
// about a quarter full when read (a fast churn fills a 4096-record log in tens of milliseconds,
// and what a full log writes goes through the spill map, several times the cost of a record),
// but not sooner than every 2 ms.
absl::Duration AllocationLogNextRead(absl::Duration interval, absl::Duration waited,
                                     double fullest);

struct AllocationLogMaps {
  bpf_map* allocs;
  bpf_map* frees;
  bpf_map* heads;
  bpf_map* tails;
  bpf_map* order;
  bpf_map* spill;
  uint32_t cpus;
  uint32_t records_bits;
};

class AllocationLogReader {
 public:
  // Maps the logs; the thread starts with Start().
  static absl::StatusOr<std::unique_ptr<AllocationLogReader>> Open(const AllocationLogMaps& maps,
                                                                   size_t max_live);
  ~AllocationLogReader();

  void Start(absl::Duration interval);
  // Reads what was logged up to now, then calls `f` with the matcher (under the lock).
  template <typename F>
  void WithLatest(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    DrainLocked();
    f(static_cast<const AllocationMatcher&>(matcher_));
  }

  struct Stats {
    uint64_t drains = 0;
    uint64_t records = 0;
    uint64_t spilled = 0;
    absl::Duration busy;  // CPU time spent reading and matching
  };
  Stats stats() const;

 private:
  AllocationLogReader(const AllocationLogMaps& maps, size_t max_live)
      : maps_(maps), matcher_(max_live) {}
  // Returns how full the fullest log was (0..1) before this read.
  double DrainLocked();
  void ReadSpill(std::vector<AllocationLogRecord>& out);  // and empties the spill map

  AllocationLogMaps maps_;
  MappedArray allocs_, frees_, heads_, tails_, order_;
  mutable std::mutex mu_;
  AllocationMatcher matcher_;
  std::vector<AllocationLogRecord> records_;
  uint64_t spilled_seen_ = 0;  // the CPUs' spill counts at the last read of the spill map
  std::vector<AllocationLogRecord> spilled_frees_;  // applied one read later (see DrainLocked)
  Stats stats_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kpath
