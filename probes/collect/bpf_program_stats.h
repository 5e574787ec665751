// The kernel's per-program run-time statistics (bpf_prog_info.run_time_ns / run_cnt). The kernel
// keeps them only while `kernel.bpf_stats_enabled` is 1 or someone holds a BPF_ENABLE_STATS fd.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

struct BpfProgramRunStats {
  uint64_t run_time_ns = 0;
  uint64_t run_count = 0;
  uint32_t id = 0;  // the kernel's program id
};

absl::StatusOr<BpfProgramRunStats> ReadBpfProgramRunStats(int prog_fd);

// True when <procfs>/sys/kernel/bpf_stats_enabled reads 1.
bool KernelBpfStatsEnabled(const HostPaths& paths);

// kpathd holding a BPF_ENABLE_STATS fd for its whole run (hooks.bpf_stats: always): the
// statistics are then as complete as with the sysctl on. Holders call this on taking and on
// closing their fd; a hold for part of the time (hooks.bpf_stats: sampled) does not count.
void NoteBpfStatsHeldByKpathd(bool held);
// The kernel keeps complete per-program run-time statistics: the sysctl is on, or kpathd holds
// a BPF_ENABLE_STATS fd (NoteBpfStatsHeldByKpathd).
bool BpfRunStatsComplete(const HostPaths& paths);

// A program's run time and runs estimated from duty-cycled statistics (hooks.bpf_stats: sampled).
struct BpfRunEstimate {
  double run_time_ns = 0;
  double run_count = 0;
};
// The sampler (probes/hooks/bpf_stats_sampler.h) prices every program of the host from its
// slices; the foreign-hook inventory keeps the foreign ones and hands kpathd's own over here, by
// program id, for kpath_bpf_program_run_seconds_total (operator review D8: without this, kpathd's
// own cost was invisible under the default hooks.bpf_stats).
void AddSampledBpfRunEstimate(uint32_t program_id, const BpfRunEstimate& estimate);
// The estimates handed over since the previous call, by program id.
std::map<uint32_t, BpfRunEstimate> TakeSampledBpfRunEstimates();

// kpathd's own programs' cost as a counter that only grows: exact deltas of the kernel's
// counters while they are complete, sampled estimates otherwise, switching between the two as
// the sysctl or the hold changes. Keyed by (probe, program); pure, for unit tests.
class OwnBpfRunCost {
 public:
  struct Key {
    std::string probe;
    std::string program;
    auto operator<=>(const Key&) const = default;
  };
  // One collection of one program: its kernel counters now, whether they are complete, and the
  // sampled estimate since the previous collection (nullopt: none arrived).
  void Update(const Key& key, const BpfProgramRunStats& kernel, bool complete,
              std::optional<BpfRunEstimate> estimate);
  // The program's cost so far; nullopt until it was priced once (exactly or by estimate).
  std::optional<BpfRunEstimate> Total(const Key& key) const;

 private:
  struct Account {
    BpfProgramRunStats last;  // the kernel's counters at the previous update (the baseline)
    bool has_last = false;
    bool priced = false;
    BpfRunEstimate total;
  };
  std::map<Key, Account> accounts_;
};

}  // namespace kpath
