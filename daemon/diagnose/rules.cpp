// Diagnose(): the probes and collectors of the last collection, then each rule in turn, each with
// its Finding named here once (id, title, seeds, runbooks).
#include <algorithm>

#include "daemon/diagnose/rule.h"
#include "daemon/events/event_json.h"
#include "fmt/format.h"
#include "probes/collect/health_metrics.h"
#include "probes/collect/human_units.h"

namespace kpath {
namespace diagnose {

namespace {

// Whether `family`{probe} is positive.
bool ProbeFlag(const Samples& s, const MetricSpec& family, const std::string& probe) {
  for (const Sample& p : s.Get(family))
    if (p.labels.count("probe") && p.labels.at("probe") == probe && p.value > 0) return true;
  return false;
}

struct Rule {
  const char* id;
  const char* title;
  const char* seeds;
  std::vector<std::string> runbooks;
  void (*check)(const Watch&, Finding&);
};

const std::vector<Rule>& Rules() {
  static const std::vector<Rule> kRules = {
      {"percpu_cgroup_churn",
       "Percpu memory growth and cgroup churn",
       "seed 000",
       {"KpathCgroupChurnHigh", "KpathPercpuGrowing", "KpathDyingCgroupsPilingUp"},
       PercpuAndChurn},
      {"irqoff", "IRQ-disabled regions", "seeds 001, 004", {"KpathIrqOffLong"}, IrqOff},
      {"slabinfo_readers",
       "/proc/slabinfo readers and large slab caches",
       "seed 001",
       {"KpathSlabinfoReadWithLargeSlab"},
       SlabinfoReaders},
      {"foreign_hooks",
       "Kernel hooks of other software",
       "seed 002",
       {"KpathForeignHookOnHotFunction", "KpathForeignBpfCpuHigh"},
       ForeignHooks},
      {"madvise_tlb",
       "madvise storms and TLB shootdowns",
       "seed 003",
       {"KpathMadviseStorm", "KpathTlbShootdownStorm"},
       MadviseTlb},
  };
  return kRules;
}

}  // namespace

std::vector<std::string> EventsOf(const Observation& o, std::string_view kind) {
  std::vector<std::string> out;
  for (const std::string& line : o.events) {
    if (JsonField(line, "kind") == kind) out.push_back(line);
  }
  return out;
}

double Watch::Seconds() const { return std::max(observation.elapsed_seconds, 1e-3); }

bool Watch::Attached(const std::string& probe) const {
  return ProbeFlag(last, health_metrics::kProbeAttached, probe);
}

std::string Watch::NotAttached(const std::string& probe) const {
  if (ProbeFlag(last, health_metrics::kProbeExcludedByConfig, probe)) {
    return fmt::format(
        "not checked: probe {} is off by configuration (this kernel offers only a mechanism "
        "left out of the defaults for its cost; probes.{}.mechanisms in kpathd.yaml can add it)",
        probe, probe);
  }
  return fmt::format(
      "not checked: probe {} is not attached (kpathd's log at --log-level info says why)", probe);
}

bool Watch::Require(const std::string& probe, Finding& f) const {
  if (Attached(probe)) return true;
  f.state = Finding::State::kNotChecked;
  f.summary = NotAttached(probe);
  return false;
}

std::string Bytes(double b) { return FormatBytesIEC(b); }

std::string Seconds(double s) {
  if (s >= 1) return fmt::format("{:.1f} s", s);
  if (s >= 0.001) return fmt::format("{:.0f} ms", s * 1e3);
  return fmt::format("{:.0f} us", s * 1e6);
}

std::string Rate(double per_second) {
  if (per_second >= 100) return fmt::format("{:.0f}/s", per_second);
  if (per_second >= 1) return fmt::format("{:.1f}/s", per_second);
  return fmt::format("{:.2f}/s", per_second);
}

std::string Count(double n) { return fmt::format("{:.0f}", n); }

}  // namespace diagnose

bool Diagnosis::AnythingFound() const {
  for (const Finding& f : findings)
    if (f.state == Finding::State::kFound) return true;
  return false;
}

Diagnosis Diagnose(const Observation& o, const DiagnoseThresholds& t) {
  using diagnose::Sample;
  const diagnose::Watch w(o, t);
  Diagnosis d;
  d.elapsed_seconds = o.elapsed_seconds;
  d.interrupted = o.interrupted;
  d.cpus = o.cpus;
  for (const Sample& s : w.last.Get(health_metrics::kProbeAttached)) {
    d.probes.push_back(ProbeStatus{s.labels.count("probe") ? s.labels.at("probe") : "?",
                                   s.labels.count("mechanism") ? s.labels.at("mechanism") : "?",
                                   s.value > 0});
  }
  for (const Sample& s : w.last.Get(health_metrics::kCollectorSuccess))
    if (s.value == 0 && s.labels.count("collector"))
      d.failing_collectors.push_back(s.labels.at("collector"));
  for (const diagnose::Rule& rule : diagnose::Rules()) {
    Finding f;
    f.id = rule.id;
    f.title = rule.title;
    f.seeds = rule.seeds;
    f.runbooks = rule.runbooks;
    rule.check(w, f);
    d.findings.push_back(std::move(f));
  }
  return d;
}

}  // namespace kpath
