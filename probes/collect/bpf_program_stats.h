// The kernel's per-program run-time statistics (bpf_prog_info.run_time_ns / run_cnt). The kernel
// keeps them only while `kernel.bpf_stats_enabled` is 1 or someone holds a BPF_ENABLE_STATS fd.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

struct BpfProgramRunStats {
  uint64_t run_time_ns = 0;
  uint64_t run_count = 0;
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

}  // namespace kpath
