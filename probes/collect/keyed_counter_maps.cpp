#include "probes/collect/keyed_counter_maps.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fmt/format.h"

namespace kpath {

namespace {
absl::Status Errno(std::string_view what, int err) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      fmt::format("{}: {}", what, std::strerror(err)));
}
}  // namespace

absl::StatusOr<KeyedCounterMaps> KeyedCounterMaps::Find(bpf_object* obj,
                                                        const std::string& prefix) {
  KeyedCounterMaps m;
  auto find = [&](const std::string& name) -> bpf_map* {
    return bpf_object__find_map_by_name(obj, name.c_str());
  };
  bpf_map* b0 = find(prefix + "_0");
  bpf_map* b1 = find(prefix + "_1");
  bpf_map* active = find(prefix + "_active");
  bpf_map* overflow = find(prefix + "_overflow");
  if (!b0 || !b1 || !active || !overflow) {
    return absl::NotFoundError(fmt::format("keyed counter maps {}_* not in the object", prefix));
  }
  if (bpf_map__value_size(b0) % sizeof(uint64_t) != 0) {
    return absl::InvalidArgumentError(fmt::format("{}: value is not whole __u64 fields", prefix));
  }
  m.buffer_fd_[0] = bpf_map__fd(b0);
  m.buffer_fd_[1] = bpf_map__fd(b1);
  m.active_fd_ = bpf_map__fd(active);
  m.overflow_fd_ = bpf_map__fd(overflow);
  m.key_size_ = bpf_map__key_size(b0);
  m.value_words_ = bpf_map__value_size(b0) / sizeof(uint64_t);
  m.capacity_ = bpf_map__max_entries(b0);
  if (m.buffer_fd_[0] < 0 || m.active_fd_ < 0) {
    return absl::FailedPreconditionError(fmt::format("{}: maps not loaded", prefix));
  }
  if (bpf_map* cache = find(prefix + "_cache")) {
    // An element per buffer: KPATH_COUNTER_CACHE_SLOTS of struct {__u64 used; value_t value;
    // key_t key;}, keys being whole __u64 words.
    size_t entry_size = sizeof(uint64_t) + bpf_map__value_size(b0) + m.key_size_;
    if (bpf_map__value_size(cache) % entry_size != 0 || bpf_map__max_entries(cache) != 2) {
      return absl::InvalidArgumentError(
          fmt::format("{}_cache: not the layout of KPATH_CACHED_KEYED_COUNTERS", prefix));
    }
    m.cache_fd_ = bpf_map__fd(cache);
    m.cache_slots_ = bpf_map__value_size(cache) / entry_size;
    m.cache_entry_size_ = entry_size;
  }
  return m;
}

absl::Status KeyedCounterMaps::DrainCache(
    uint32_t buffer, int ncpus,
    const std::function<void(const uint8_t* key, const uint64_t* values)>& add) {
  const size_t entry_words = cache_entry_size_ / sizeof(uint64_t);
  const size_t cpu_words = entry_words * cache_slots_;
  std::vector<uint64_t> per_cpu(cpu_words * static_cast<size_t>(ncpus));
  if (bpf_map_lookup_elem(cache_fd_, &buffer, per_cpu.data()) != 0) {
    return Errno("read counter cache", errno);
  }
  bool used = false;
  for (size_t cpu = 0; cpu < static_cast<size_t>(ncpus); ++cpu) {
    for (size_t slot = 0; slot < cache_slots_; ++slot) {
      const uint64_t* entry = per_cpu.data() + cpu * cpu_words + slot * entry_words;
      if (entry[0] == 0) continue;
      used = true;
      add(reinterpret_cast<const uint8_t*>(entry + 1 + value_words_), entry + 1);
    }
  }
  if (!used) return absl::OkStatus();
  // No program writes to this buffer's element any more (it was flipped away from before the
  // grace period); the other buffer's is left alone.
  std::fill(per_cpu.begin(), per_cpu.end(), 0);
  if (bpf_map_update_elem(cache_fd_, &buffer, per_cpu.data(), BPF_ANY) != 0) {
    return Errno("empty counter cache", errno);
  }
  return absl::OkStatus();
}

absl::Status KeyedCounterMaps::Drain(const Visitor& visit, std::chrono::microseconds grace) {
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return Errno("libbpf_num_possible_cpus", -ncpus);

  // Flip: programs that start from now on write into the other buffer.
  uint32_t zero = 0;
  uint32_t next = active_ ^ 1;
  if (bpf_map_update_elem(active_fd_, &zero, &next, BPF_ANY) != 0) {
    return Errno("flip active buffer", errno);
  }
  uint32_t drained = active_;  // also the overflow slot's index
  active_ = next;
  // Programs already running on the old buffer finish within microseconds (they never sleep).
  std::this_thread::sleep_for(grace);

  int fd = buffer_fd_[drained];
  std::vector<uint64_t> per_cpu(value_words_ * static_cast<size_t>(ncpus));
  std::vector<uint64_t> sums(value_words_);
  auto sum_cpus = [&] {
    std::fill(sums.begin(), sums.end(), 0);
    for (int cpu = 0; cpu < ncpus; ++cpu)
      for (size_t w = 0; w < value_words_; ++w) sums[w] += per_cpu[cpu * value_words_ + w];
  };

  // Sums by key, over the cache entries of every CPU and the hash, in the order keys are seen.
  std::unordered_map<std::string, size_t> index;
  std::vector<const std::string*> order;
  std::vector<uint64_t> totals;
  auto add = [&](const uint8_t* key, const uint64_t* values) {
    auto [it, inserted] =
        index.try_emplace(std::string(reinterpret_cast<const char*>(key), key_size_), order.size());
    if (inserted) {
      order.push_back(&it->first);
      totals.resize(totals.size() + value_words_, 0);
    }
    uint64_t* sum = totals.data() + it->second * value_words_;
    for (size_t w = 0; w < value_words_; ++w) sum[w] += values[w];
  };
  if (cache_fd_ >= 0) {
    if (absl::Status s = DrainCache(drained, ncpus, add); !s.ok()) return s;
  }

  // Collect the keys first: deleting while iterating with get_next_key restarts the walk.
  std::vector<uint8_t> keys;
  std::vector<uint8_t> key(key_size_), next_key(key_size_);
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, next_key.data()) == 0) {
    keys.insert(keys.end(), next_key.begin(), next_key.end());
    key = next_key;
    prev = key.data();
  }
  last_keys_ = key_size_ ? keys.size() / key_size_ : 0;
  // Zeroed on every CPU before the delete: kernels before "bpf: Zero-fill re-used per-cpu map
  // element" (d3bec0138bfb, 5.10; 4.19.79 has not) hand a deleted element of a preallocated
  // per-CPU hash to the next insert with the other CPUs' old values in it, because an insert
  // from BPF sets only its own CPU's, and the next drain would count those again (seen on
  // 4.19.79 under QEMU: 110 mkdirs counted for 100).
  const std::vector<uint64_t> zeros(per_cpu.size(), 0);
  for (size_t off = 0; off < keys.size(); off += key_size_) {
    const void* k = keys.data() + off;
    if (bpf_map_lookup_elem(fd, k, per_cpu.data()) != 0) continue;
    bpf_map_update_elem(fd, k, zeros.data(), BPF_EXIST);
    bpf_map_delete_elem(fd, k);
    sum_cpus();
    add(static_cast<const uint8_t*>(k), sums.data());
  }
  for (size_t i = 0; i < order.size(); ++i) {
    visit(order[i]->data(),
          std::span<const uint64_t>(totals.data() + i * value_words_, value_words_));
  }

  // The drained buffer's overflow slot: counts of keys that found that hash full.
  if (bpf_map_lookup_elem(overflow_fd_, &drained, per_cpu.data()) == 0) {
    sum_cpus();
    bool any = false;
    for (uint64_t v : sums) any |= v != 0;
    if (any) {
      std::vector<uint64_t> zeros(per_cpu.size(), 0);
      bpf_map_update_elem(overflow_fd_, &drained, zeros.data(), BPF_ANY);
      visit(nullptr, sums);
    }
  }
  return absl::OkStatus();
}

}  // namespace kpath
