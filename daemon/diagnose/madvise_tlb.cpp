// seed 003: madvise storms (memory returned to the kernel call by call) and the TLB
// shootdowns they cause.
#include <algorithm>
#include <optional>
#include <string>

#include "daemon/diagnose/rule.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/madvise/madvise_metrics.h"
#include "probes/procfs/procfs_metrics.h"

namespace kpath::diagnose {

void MadviseTlb(const Watch& w, Finding& f) {
  const double secs = w.Seconds();
  const int cpus = std::max(w.observation.cpus, 1);

  auto cpu = w.Growth(procfs_metrics::kCpuSecondsTotal, {"mode"});
  double user = cpu.count({"user"}) ? cpu.at({"user"}) : 0;
  double system = cpu.count({"system"}) ? cpu.at({"system"}) : 0;
  if (user + system > 0) {
    f.evidence.push_back(fmt::format("CPU: {:.0f}% user, {:.0f}% system (of {} CPUs)",
                                     100 * user / secs / cpus, 100 * system / secs / cpus, cpus));
  }
  std::optional<double> s0 = w.first.Value(procfs_metrics::kTlbShootdownsTotal);
  std::optional<double> s1 = w.last.Value(procfs_metrics::kTlbShootdownsTotal);
  double shootdowns = s0 && s1 ? (*s1 - *s0) / secs / cpus : 0;
  // Without the series (no TLB row in /proc/interrupts: arm64 invalidates other CPUs' TLBs with
  // broadcast TLBI instructions, not IPIs) there is no rate to report, not a rate of 0.
  const std::string shootdown_text =
      s0 && s1 ? fmt::format("{} TLB shootdowns per CPU", Rate(shootdowns))
               : "TLB shootdowns not countable here";
  if (s0 && s1) {
    f.evidence.push_back(fmt::format("TLB shootdowns: {} per CPU", Rate(shootdowns)));
  } else {
    f.evidence.push_back(
        "TLB shootdowns: not countable: /proc/interrupts has no TLB row (only x86 sends "
        "shootdown IPIs; arm64 invalidates with broadcast TLBI instructions, which no counter "
        "shows)");
  }
  std::vector<std::string> storms;
  bool madvise_probe = w.Attached("madvise");
  if (madvise_probe) {
    auto returning = [](const Labels& l) {
      return l.count("advice") && (l.at("advice") == "dontneed" || l.at("advice") == "free");
    };
    auto calls = w.Growth(madvise_metrics::kMadviseCallsTotal, {"comm"}, returning);
    auto bytes = w.Growth(madvise_metrics::kMadviseBytesTotal, {"comm"}, returning);
    for (const auto& [key, n] : Top(calls, 5)) {
      double rate = n / secs;
      f.evidence.push_back(
          fmt::format("process {} returned memory with MADV_DONTNEED/MADV_FREE {} ({}/s)", key[0],
                      Rate(rate), Bytes((bytes.count(key) ? bytes.at(key) : 0) / secs)));
      f.culprits.push_back(Culprit{{{"comm", key[0]}}, rate, "madvise calls/s"});
      if (rate >= w.thresholds.madvise_calls_per_second) storms.push_back(key[0]);
    }
  } else {
    f.evidence.push_back("madvise calls: " + w.NotAttached("madvise"));
  }
  bool tlb_storm = shootdowns >= w.thresholds.tlb_shootdowns_per_cpu_per_second;
  if (storms.empty() && !tlb_storm) {
    f.state = madvise_probe || (s0 && s1) ? Finding::State::kOk : Finding::State::kNotChecked;
    f.summary = fmt::format("no madvise storm; {}", shootdown_text);
    return;
  }
  f.state = Finding::State::kFound;
  f.summary = storms.empty()
                  ? fmt::format("{} TLB shootdowns per CPU, without a madvise storm behind them",
                                Rate(shootdowns))
                  : fmt::format("{} returns memory to the kernel in a storm of madvise calls; {}",
                                fmt::join(storms, ", "), shootdown_text);
  if (!storms.empty()) {
    f.fixes.push_back(
        "Go: pool the large short-lived allocations (sync.Pool) so fewer GCs return memory. "
        "Risk: a code change; pooled objects must be reset before reuse.");
    f.fixes.push_back(
        "Go 1.19+: GOMEMLIMIT (about 80% of the container limit) with a higher GOGC (e.g. 400): "
        "seed 003 cut madvise 90% and system CPU from 50% to 5%. Risk: more steady memory; too "
        "close to the limit and the GC thrashes.");
    f.fixes.push_back(
        "Other allocators: return memory less eagerly (jemalloc dirty_decay_ms, glibc "
        "M_TRIM_THRESHOLD, JVM heap uncommit delays).");
  } else {
    f.fixes.push_back(
        "Without a madvise storm: check automatic NUMA balancing, KSM, THP compaction, or a "
        "process that maps and unmaps in a loop (perf record -e tlb:tlb_flush -ag). Each "
        "setting affects the whole host: change it on one node first.");
  }
}

}  // namespace kpath::diagnose
