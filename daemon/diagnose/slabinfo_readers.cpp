// seed 001: processes that read /proc/slabinfo while a slab cache is large (each read walks it
// with IRQs off).
#include "daemon/diagnose/rule.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/slab/slab_metrics.h"

namespace kpath::diagnose {

void SlabinfoReaders(const Watch& w, Finding& f) {
  std::string largest;
  double largest_objects = 0;
  for (const Sample& s : w.last.Get(slab_metrics::kSlabObjects)) {
    if (s.value > largest_objects) {
      largest_objects = s.value;
      largest = s.labels.count("cache") ? s.labels.at("cache") : "?";
    }
  }
  if (!largest.empty()) {
    f.evidence.push_back(
        fmt::format("largest slab cache: {} with {} objects", largest, Count(largest_objects)));
  }
  if (!w.Require("slabinfo_readers", f)) return;
  auto reads = w.Growth(slab_metrics::kSlabinfoReadsTotal, {"comm"});
  for (const auto& [key, n] : Top(reads, 5)) {
    f.evidence.push_back(
        fmt::format("process {} opened /proc/slabinfo {} times", key[0], Count(n)));
    f.culprits.push_back(Culprit{{{"comm", key[0]}}, n, "opens"});
  }
  double total = Total(reads);
  if (total < 1 || largest_objects < w.thresholds.slab_objects_large) {
    f.state = Finding::State::kOk;
    f.summary = total < 1 ? "nobody read /proc/slabinfo"
                          : fmt::format(
                                "/proc/slabinfo read {} times, but the slab caches are "
                                "small (each read is short)",
                                Count(total));
    return;
  }
  f.state = Finding::State::kFound;
  f.summary = fmt::format(
      "{} reads /proc/slabinfo ({} times in {}) while {} holds {} objects: "
      "each read walks them with IRQs off",
      Top(reads, 1).front().first[0], Count(total), Seconds(w.observation.elapsed_seconds), largest,
      Count(largest_objects));
  f.fixes.push_back(
      "Stop the periodic ss -p (or whatever reads /proc/slabinfo), drop -p, or upgrade "
      "iproute2: newer ss does not read /proc/slabinfo. Risk: the monitoring loses the "
      "process names of sockets.");
  f.fixes.push_back(
      "Readers that need slab numbers: read /sys/kernel/slab/<cache>/objects instead, as kpathd "
      "does.");
  f.fixes.push_back(
      "Shrink the caches once: echo 2 > /proc/sys/vm/drop_caches. Risk: the drop stalls the "
      "host for seconds to minutes; they grow back if /proc scanning goes on.");
}

}  // namespace kpath::diagnose
