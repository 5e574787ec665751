#include "probes/percpu/allocation_log_reader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <time.h>

#include <algorithm>

#include "probes/collect/bpf_maps.h"
#include "probes/percpu/percpu.h"

namespace kpath {

namespace {
template <typename T>
uint64_t LoadAcquire(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
}  // namespace

absl::StatusOr<std::unique_ptr<AllocationLogReader>> AllocationLogReader::Open(
    const AllocationLogMaps& maps, size_t max_live) {
  std::unique_ptr<AllocationLogReader> reader(new AllocationLogReader(maps, max_live));
  struct Mapping {
    MappedArray* into;
    bpf_map* map;
    bool writable;
  };
  for (const Mapping& m :
       {Mapping{&reader->allocs_, maps.allocs, false}, Mapping{&reader->frees_, maps.frees, false},
        Mapping{&reader->heads_, maps.heads, false}, Mapping{&reader->tails_, maps.tails, true},
        Mapping{&reader->order_, maps.order, false}}) {
    absl::StatusOr<MappedArray> mapped = MappedArray::Of(m.map, m.writable);
    if (!mapped.ok()) return mapped.status();
    *m.into = *std::move(mapped);
  }
  return reader;
}

AllocationLogReader::~AllocationLogReader() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Duration AllocationLogNextRead(absl::Duration interval, absl::Duration waited,
                                     double fullest) {
  constexpr double kTarget = 0.25;  // how full a log should be when read
  const absl::Duration fastest = std::min(absl::Milliseconds(2), interval);
  if (!(fullest > 0) || waited <= absl::ZeroDuration()) return interval;
  return std::clamp(waited * (kTarget / fullest), fastest, interval);
}

void AllocationLogReader::Start(absl::Duration interval) {
  thread_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> stop_lock(stop_mu_);
    absl::Duration wait = interval;
    absl::Time last = absl::Now();
    while (
        !stop_cv_.wait_for(stop_lock, absl::ToChronoMicroseconds(wait), [this] { return stop_; })) {
      double fullest = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        fullest = DrainLocked();
      }
      const absl::Time now = absl::Now();
      wait = AllocationLogNextRead(interval, now - last, fullest);
      last = now;
    }
  });
}

AllocationLogReader::Stats AllocationLogReader::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void AllocationLogReader::ReadSpill(std::vector<AllocationLogRecord>& out) {
  // In batches, each taken out of the map as it is read (Linux 5.6+; the log needs 5.12).
  // Entries added meanwhile to buckets already read wait for the next read.
  int fd = bpf_map__fd(maps_.spill);
  constexpr uint32_t kBatch = 4096;
  std::vector<percpu_log_spill_key> keys(kBatch);
  std::vector<percpu_log_spill_value> values(kBatch);
  uint64_t token = 0;
  bool first = true;
  for (;;) {
    uint32_t count = kBatch;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    int err = bpf_map_lookup_and_delete_batch(fd, first ? nullptr : &token, &token, keys.data(),
                                              values.data(), &count, &opts);
    first = false;
    for (uint32_t i = 0; i < count; ++i) {
      bool free = (keys[i].stamp & PERCPU_LOG_SPILL_FREE) != 0;
      out.push_back({keys[i].stamp & ~PERCPU_LOG_SPILL_FREE, free, keys[i].ptr, values[i].caller,
                     values[i].bytes});
    }
    stats_.spilled += count;
    if (err != 0) break;  // ENOENT: the last batch
  }
}

double AllocationLogReader::DrainLocked() {
  timespec cpu_start{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_start);
  const auto* heads = static_cast<const percpu_log_cursor*>(heads_.data());
  auto* tails = static_cast<percpu_log_cursor*>(tails_.writable_data());
  const auto* allocs = static_cast<const percpu_log_alloc*>(allocs_.data());
  const auto* frees = static_cast<const percpu_log_free*>(frees_.data());
  const uint64_t size = uint64_t{1} << maps_.records_bits;
  const uint64_t mask = size - 1;
  records_.clear();
  // Frees held back from the last read (below).
  records_.insert(records_.end(), spilled_frees_.begin(), spilled_frees_.end());
  spilled_frees_.clear();

  // Frees first, then allocations: every free read has its allocation read too (an allocation is
  // logged before its memory can be freed). Not the other way round: an allocation read may
  // follow a free not yet read, which the matcher's order stamps sort out.
  uint64_t most = 0;  // records in the fullest log
  // Every CPU's records of one log (`count`: its member of percpu_log_cursor) from the tail to
  // the head, then the tail moved up to the head.
  auto read_log = [&](decltype(&percpu_log_cursor::frees) count, auto&& record) {
    for (uint32_t cpu = 0; cpu < maps_.cpus; ++cpu) {
      const uint64_t head = LoadAcquire(&(heads[cpu].*count));
      const uint64_t tail = tails[cpu].*count;
      most = std::max(most, head - tail);
      for (uint64_t n = tail; n != head; ++n) {
        records_.push_back(record((uint64_t{cpu} << maps_.records_bits) | (n & mask)));
      }
      __atomic_store_n(&(tails[cpu].*count), head, __ATOMIC_RELEASE);
    }
  };
  read_log(&percpu_log_cursor::frees, [&](uint64_t i) {
    return AllocationLogRecord{frees[i].stamp, true, frees[i].ptr, 0, 0};
  });
  // Spilled records: a spilled free may have been added while the map was read, after its
  // allocation's place in the map was passed: frees from the spill map wait for the next read.
  size_t before_spill = records_.size();
  const uint64_t spilled_before = stats_.spilled;
  uint64_t spilled = 0;
  for (uint32_t cpu = 0; cpu < maps_.cpus; ++cpu) spilled += LoadAcquire(&heads[cpu].spilled);
  if (spilled != spilled_seen_) {  // else the map is empty: not walked (its buckets cost)
    spilled_seen_ = spilled;
    ReadSpill(records_);
  }
  for (size_t i = before_spill; i < records_.size();) {
    if (records_[i].free) {
      spilled_frees_.push_back(records_[i]);
      records_[i] = records_.back();
      records_.pop_back();
    } else {
      ++i;
    }
  }
  read_log(&percpu_log_cursor::allocs, [&](uint64_t i) {
    const percpu_log_alloc& r = allocs[i];
    return AllocationLogRecord{r.stamp_bytes >> 32, false, r.ptr, r.caller,
                               r.stamp_bytes & 0xffffffff};
  });
  // Allocations carry their stamp mod 2^32: the full one is the latest with those low bits at or
  // below the stamp now (read after the records: no allocation read has a later one).
  const uint64_t now = LoadAcquire(static_cast<const uint64_t*>(order_.data()));
  for (AllocationLogRecord& r : records_) {
    if (!r.free) r.stamp = now - static_cast<uint32_t>(static_cast<uint32_t>(now) - r.stamp);
  }
  stats_.records += records_.size();
  ++stats_.drains;
  matcher_.Apply(records_);
  timespec cpu_end{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_end);
  stats_.busy += absl::DurationFromTimespec(cpu_end) - absl::DurationFromTimespec(cpu_start);
  // A log that spilled was full: as full as can be.
  return stats_.spilled > spilled_before ? 1.0 : static_cast<double>(most) / size;
}

}  // namespace kpath
