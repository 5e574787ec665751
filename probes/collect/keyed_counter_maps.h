// User-space side of KPATH_KEYED_COUNTERS and KPATH_CACHED_KEYED_COUNTERS
// (probes/bpf/kpath_bpf.h): flips the active buffer, then drains the one the BPF programs stopped
// writing to, summing each key's per-CPU values (and, with the per-CPU cache, the cache entries
// of that buffer on every CPU), and empties it. The overflow slot (keys that found the hash full)
// is drained too and reported with a null key: those counts are exported under "other", never
// dropped.
#pragma once

#include <bpf/libbpf.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kpath {

class KeyedCounterMaps {
 public:
  // Called once per key: `key` points at key_size bytes (nullptr for the overflow slot), `sums`
  // holds one total per __u64 field of the value struct, summed over CPUs (and over the cache).
  using Visitor = std::function<void(const void* key, std::span<const uint64_t> sums)>;

  // `prefix` is the name given to KPATH_KEYED_COUNTERS; the maps are found in `obj`.
  static absl::StatusOr<KeyedCounterMaps> Find(bpf_object* obj, const std::string& prefix);

  // Flips the buffer, waits `grace` for programs still running on the old one, drains it.
  absl::Status Drain(const Visitor& visit,
                     std::chrono::microseconds grace = std::chrono::milliseconds(2));

  // Keys the last drain found (how full the hash got in one interval).
  size_t last_keys() const { return last_keys_; }
  size_t capacity() const { return capacity_; }
  // The buffer (0 or 1) the last Drain emptied: maps the programs fill alongside the counters,
  // per buffer, are read and emptied for that one.
  uint32_t last_drained() const { return active_ ^ 1; }

 private:
  // Passes the drained buffer's cache entries, on every CPU, to `add`, and empties them.
  absl::Status DrainCache(
      uint32_t buffer, int ncpus,
      const std::function<void(const uint8_t* key, const uint64_t* values)>& add);

  int active_fd_ = -1;
  int buffer_fd_[2] = {-1, -1};
  int overflow_fd_ = -1;
  int cache_fd_ = -1;            // KPATH_CACHED_KEYED_COUNTERS only: an element per buffer
  size_t cache_slots_ = 0;       // entries in each
  size_t cache_entry_size_ = 0;  // {used, value, key}
  size_t key_size_ = 0;
  size_t value_words_ = 0;
  size_t capacity_ = 0;
  uint32_t active_ = 0;
  size_t last_keys_ = 0;
};

}  // namespace kpath
