// seeds 001 and 004: IRQ-disabled regions, by process and the kernel function that held IRQs
// off.
#include <algorithm>
#include <string_view>

#include "daemon/diagnose/rule.h"
#include "daemon/events/event_json.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/irqoff/irqoff_metrics.h"

namespace kpath::diagnose {

namespace {

bool SlabinfoCulprit(const std::string& culprit) {
  for (std::string_view s : {"slab", "count_partial", "s_show", "s_next"})
    if (culprit.find(s) != std::string::npos) return true;
  return false;
}

// "the 5 longest IRQ-off regions" of the events (the last hour of the running kpathd's, or the
// watch's), with their CPU, time and stack: evidence, whatever the watch itself saw.
void LongestRegions(const Observation& o, Finding& f) {
  std::vector<std::pair<double, std::string>> regions;
  for (const std::string& line : EventsOf(o, event_kind::kIrqOffRegion)) {
    const double seconds = std::stod(JsonField(line, "seconds").value_or("0"));
    regions.emplace_back(seconds, fmt::format("{}: {}", JsonField(line, "time").value_or("?"),
                                              JsonField(line, "message").value_or("")));
  }
  if (regions.empty()) return;
  std::stable_sort(regions.begin(), regions.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  f.evidence.push_back(
      fmt::format("the {} longest of {} region{} in {}:", std::min<size_t>(regions.size(), 5),
                  regions.size(), regions.size() == 1 ? "" : "s", o.events_source));
  for (size_t i = 0; i < regions.size() && i < 5; ++i) {
    f.evidence.push_back(fmt::format("  {}", regions[i].second));
  }
}

// What the watch counted, by process and culprit.
void WatchedRegions(const Watch& w, Finding& f) {
  double threshold = w.last.Value(irqoff_metrics::kThresholdSeconds).value_or(0.01);
  auto regions = w.Growth(irqoff_metrics::kRegionsTotal, {"comm", "culprit"});
  double total = Total(regions);
  if (total < 1) {
    f.state = Finding::State::kOk;
    f.summary = fmt::format("no region of {} or more", Seconds(threshold));
    return;
  }
  f.state = Finding::State::kFound;
  auto top = Top(regions, 5);
  f.summary = fmt::format(
      "{} region{} of {} or more with interrupts disabled, the longest {}; "
      "most under process {} in kernel function {}",
      Count(total), total == 1 ? "" : "s", Seconds(threshold),
      Seconds(w.observation.irqoff_max_seconds), top.front().first[0], top.front().first[1]);
  bool slabinfo = false;
  for (const auto& [key, n] : top) {
    f.evidence.push_back(fmt::format("process {}, kernel function {}: {} region{}", key[0], key[1],
                                     Count(n), n == 1 ? "" : "s"));
    f.culprits.push_back(Culprit{{{"comm", key[0]}, {"culprit", key[1]}}, n, "regions"});
    slabinfo = slabinfo || SlabinfoCulprit(key[1]);
  }
  f.evidence.push_back(
      fmt::format("longest region: {}", Seconds(w.observation.irqoff_max_seconds)));
  if (slabinfo) {
    f.runbooks.push_back("KpathSlabinfoReadWithLargeSlab");
    f.fixes.push_back(
        "The culprit walks the slab caches for /proc/slabinfo: stop the periodic reader, use "
        "ss without -p, or a newer ss that does not read /proc/slabinfo (iproute2 commit "
        "10f687736b8d). Risk: the monitoring loses process names of sockets.");
    f.fixes.push_back(
        "Shrink the caches once with echo 2 > /proc/sys/vm/drop_caches. Risk: the drop stalls "
        "the host for seconds to minutes; only off-peak.");
  }
  f.fixes.push_back(
      "A driver or kernel lock holding IRQs off (seed 004: spin_lock_irqsave in a driver, fixed "
      "with spin_lock_bh: 369 us -> 47 us): a kernel fix from the vendor. Meanwhile move "
      "latency-sensitive IRQs and RPS off that CPU (/proc/irq/N/smp_affinity, rps_cpus). Risk: "
      "other CPUs take that load.");
}

}  // namespace

void IrqOff(const Watch& w, Finding& f) {
  if (!w.Require("irqoff", f)) return;
  WatchedRegions(w, f);
  LongestRegions(w.observation, f);
}

}  // namespace kpath::diagnose
