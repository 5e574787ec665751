// /proc/stat as data: the CPU time lines (in USER_HZ ticks) and the scalar counters. The parser
// is a pure function of the file's text so it runs against fixtures from any kernel.
//
// "cpu  user nice system idle iowait irq softirq steal guest guest_nice": the aggregate over all
// CPUs, then one "cpuN" line per online CPU. Older kernels write fewer columns (steal came in
// 2.6.11, guest in 2.6.24, guest_nice in 2.6.33); newer ones may add more, which are ignored.
// guest and guest_nice are already included in user and nice: summing every mode counts guest
// time twice.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kpath {

// The CPU time columns of /proc/stat, in file order.
inline constexpr std::array<std::string_view, 10> kCpuModes = {
    "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"};

struct CpuTimes {
  std::string cpu;                                 // "cpu" (the aggregate), "cpu0", ...
  std::array<uint64_t, kCpuModes.size()> ticks{};  // USER_HZ ticks per mode
  size_t modes = 0;  // how many columns the kernel wrote (at most kCpuModes.size())
};

struct ProcStat {
  CpuTimes total;                            // the "cpu" line
  std::vector<CpuTimes> per_cpu;             // "cpuN" lines, in file order
  std::optional<uint64_t> context_switches;  // ctxt
  std::optional<uint64_t> boot_time;         // btime, seconds since the epoch
  std::optional<uint64_t> forks;             // processes
  std::optional<uint64_t> procs_running;
  std::optional<uint64_t> procs_blocked;
};

// Parses the text of /proc/stat. InvalidArgument, naming the 1-based line, when the aggregate
// "cpu" line is missing or has fewer than 4 columns (user, nice, system, idle: every kernel since
// 2.4 writes them), a number does not parse or overflows 64 bits, or a cpu line repeats. Lines it
// does not use (intr, softirq, page, swap, ...) are skipped. Never throws.
absl::StatusOr<ProcStat> ParseProcStat(std::string_view text);

}  // namespace kpath
