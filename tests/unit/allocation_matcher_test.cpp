// The percpu allocation log's matching (probes/percpu/allocation_matcher.h): records of one
// pointer read from several CPUs' logs in any order, matched by their order stamps.
#include "probes/percpu/allocation_matcher.h"

#include "probes/percpu/allocation_log_reader.h"

#include <catch2/catch.hpp>

namespace {

using kpath::AllocationLogRecord;
using kpath::AllocationMatcher;

AllocationLogRecord Alloc(uint64_t stamp, uint64_t ptr, uint64_t caller, uint64_t bytes) {
  return {stamp, false, ptr, caller, bytes};
}
AllocationLogRecord Free(uint64_t stamp, uint64_t ptr) { return {stamp, true, ptr, 0, 0}; }

int64_t Held(const AllocationMatcher& m, uint64_t caller) {
  auto it = m.OutstandingByCaller().find(caller);
  return it == m.OutstandingByCaller().end() ? 0 : it->second;
}

}  // namespace

TEST_CASE("a free read before its allocation in one read matches it", "[percpu][log]") {
  AllocationMatcher m(100);
  // Allocated with the stamp at 5 (no free since), freed as the 6th free (stamp 5).
  std::vector<AllocationLogRecord> records = {Free(5, 0x1000), Alloc(5, 0x1000, 7, 64)};
  m.Apply(records);
  CHECK(Held(m, 7) == 0);
  CHECK(m.untracked_frees() == 0);
  CHECK(m.live() == 0);
}

TEST_CASE("the free of memory allocated before the start, then its reuse on another CPU",
          "[percpu][log]") {
  // CPU 1 frees 0x1000 (allocated before kpathd, stamp 3); CPU 0 allocates it again (stamp 4).
  // Read in one go, CPU 0's log first: the new allocation stays live, the free is untracked.
  AllocationMatcher m(100);
  std::vector<AllocationLogRecord> records = {Alloc(4, 0x1000, 7, 64), Free(3, 0x1000)};
  m.Apply(records);
  CHECK(Held(m, 7) == 64);
  CHECK(m.untracked_frees() == 1);
  CHECK(m.live() == 1);
}

TEST_CASE("an allocation read before the free that came before it, over two reads",
          "[percpu][log]") {
  AllocationMatcher m(100);
  std::vector<AllocationLogRecord> first = {Alloc(1, 0x1000, 7, 64)};
  m.Apply(first);
  // 0x1000 freed (stamp 2) on CPU 1, allocated again (stamp 3) on CPU 0: this read saw only the
  // allocation (CPU 1's log was read before the free was written).
  std::vector<AllocationLogRecord> second = {Alloc(3, 0x1000, 8, 32)};
  m.Apply(second);
  CHECK(m.live() == 2);
  std::vector<AllocationLogRecord> third = {Free(2, 0x1000)};
  m.Apply(third);
  CHECK(Held(m, 7) == 0);  // the free matched the first allocation, not the later one
  CHECK(Held(m, 8) == 32);
  CHECK(m.untracked_frees() == 0);
  std::vector<AllocationLogRecord> fourth = {Free(9, 0x1000)};
  m.Apply(fourth);
  CHECK(Held(m, 8) == 0);
  CHECK(m.live() == 0);
}

TEST_CASE("allocations beyond the limit are counted, and their frees are untracked",
          "[percpu][log]") {
  AllocationMatcher m(1);
  std::vector<AllocationLogRecord> records = {Alloc(0, 0x1000, 7, 64), Alloc(0, 0x2000, 7, 64),
                                              Free(0, 0x2000)};
  m.Apply(records);
  CHECK(m.not_tracked() == 1);
  CHECK(m.untracked_frees() == 1);
  CHECK(Held(m, 7) == 64);
}

TEST_CASE("the allocation logs stay within their memory budget on many CPUs", "[percpu][log]") {
  using kpath::AllocationLogBits;
  CHECK(AllocationLogBits(2, 12) == 12);    // this VM: 4096 records a CPU
  CHECK(AllocationLogBits(16, 12) == 12);   // 16 x 4096 = the budget
  CHECK(AllocationLogBits(64, 12) == 10);   // 1024
  CHECK(AllocationLogBits(256, 12) == 8);   // 256
  CHECK(AllocationLogBits(4096, 12) == 6);  // the floor: 64 a CPU, over the budget
  CHECK(AllocationLogBits(1, 30) == 16);    // asked for more than the budget
  CHECK(AllocationLogBits(2, 2) == 6);      // asked for less than the floor
  for (uint32_t cpus : {1U, 3U, 7U, 96U, 255U, 384U, 1024U}) {
    const uint32_t bits = AllocationLogBits(cpus, 12);
    INFO(cpus << " CPUs: " << bits << " bits");
    CHECK((bits == 6 || (uint64_t{cpus} << bits) <= kpath::kAllocationLogBudget));
  }
}

TEST_CASE("the log reader reads sooner when a log fills fast, never faster than every 2 ms",
          "[percpu][log]") {
  using kpath::AllocationLogNextRead;
  const absl::Duration every = absl::Milliseconds(50);
  // Quiet: a log a tenth full, or empty, waits the whole interval.
  CHECK(AllocationLogNextRead(every, every, 0.1) == every);
  CHECK(AllocationLogNextRead(every, every, 0) == every);
  // Half full after 50 ms: read again in 25 ms, when it is a quarter full at that rate.
  CHECK(AllocationLogNextRead(every, every, 0.5) == absl::Milliseconds(25));
  // At that rate, a quarter full after 25 ms: stays at 25 ms.
  CHECK(AllocationLogNextRead(every, absl::Milliseconds(25), 0.25) == absl::Milliseconds(25));
  // Full (or spilled) after 50 ms: 12.5 ms; the fastest is 2 ms.
  CHECK(AllocationLogNextRead(every, every, 1.0) == absl::Microseconds(12500));
  CHECK(AllocationLogNextRead(every, absl::Milliseconds(3), 1.0) == absl::Milliseconds(2));
  // The churn stopped: back to the interval.
  CHECK(AllocationLogNextRead(every, absl::Milliseconds(2), 0.001) == every);
}
