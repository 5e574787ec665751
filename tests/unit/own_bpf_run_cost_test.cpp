// kpathd's own BPF cost as a counter (operator review D8): exact kernel deltas while the
// statistics are complete, the sampler's estimates otherwise.
#include <catch2/catch.hpp>

#include "probes/collect/bpf_program_stats.h"

namespace kpath {
namespace {

const OwnBpfRunCost::Key kTick{"irqoff", "irqoff_tick"};

TEST_CASE("Own BPF cost is priced from the sampler's estimates when statistics are off",
          "[bpf_stats]") {
  OwnBpfRunCost cost;
  // Statistics off, no slice yet: not priced, so not exported.
  cost.Update(kTick, {0, 0, 7}, false, std::nullopt);
  CHECK_FALSE(cost.Total(kTick).has_value());
  // A slice: the kernel counted 1 ms in it; the sampler scaled it to 15 ms for the period.
  cost.Update(kTick, {1000000, 100, 7}, false, BpfRunEstimate{15e6, 1500});
  REQUIRE(cost.Total(kTick).has_value());
  CHECK(cost.Total(kTick)->run_time_ns == 15e6);
  CHECK(cost.Total(kTick)->run_count == 1500);
  // A collection between slices adds nothing.
  cost.Update(kTick, {1000000, 100, 7}, false, std::nullopt);
  CHECK(cost.Total(kTick)->run_time_ns == 15e6);
  cost.Update(kTick, {2000000, 200, 7}, false, BpfRunEstimate{15e6, 1500});
  CHECK(cost.Total(kTick)->run_time_ns == 30e6);
}

TEST_CASE("Own BPF cost switches between exact and sampled without jumps", "[bpf_stats]") {
  OwnBpfRunCost cost;
  cost.Update(kTick, {5000, 5, 7}, true, std::nullopt);  // exact from the start
  CHECK(cost.Total(kTick)->run_time_ns == 5000);
  cost.Update(kTick, {8000, 8, 7}, true, std::nullopt);
  CHECK(cost.Total(kTick)->run_time_ns == 8000);
  // The sysctl goes off: the kernel's counters move only in slices; the estimate counts.
  cost.Update(kTick, {9000, 9, 7}, false, BpfRunEstimate{15000, 15});
  CHECK(cost.Total(kTick)->run_time_ns == 23000);
  // On again: only what the kernel counted since the previous collection.
  cost.Update(kTick, {9500, 10, 7}, true, BpfRunEstimate{99999, 99});
  CHECK(cost.Total(kTick)->run_time_ns == 23500);
  CHECK(cost.Total(kTick)->run_count == 24);
}

TEST_CASE("Own BPF cost keeps growing when the probe re-attaches a new program", "[bpf_stats]") {
  OwnBpfRunCost cost;
  cost.Update(kTick, {8000, 8, 7}, true, std::nullopt);
  // Re-attached: a new program id whose counters start again from 0.
  cost.Update(kTick, {300, 1, 12}, true, std::nullopt);
  CHECK(cost.Total(kTick)->run_time_ns == 8300);
  CHECK(cost.Total(kTick)->run_count == 9);
}

TEST_CASE("Sampled estimates are handed over once, summed per program", "[bpf_stats]") {
  TakeSampledBpfRunEstimates();  // whatever an earlier test left
  AddSampledBpfRunEstimate(7, {100, 1});
  AddSampledBpfRunEstimate(7, {50, 2});
  AddSampledBpfRunEstimate(9, {1, 1});
  std::map<uint32_t, BpfRunEstimate> taken = TakeSampledBpfRunEstimates();
  REQUIRE(taken.size() == 2);
  CHECK(taken[7].run_time_ns == 150);
  CHECK(taken[7].run_count == 3);
  CHECK(TakeSampledBpfRunEstimates().empty());
}

}  // namespace
}  // namespace kpath
