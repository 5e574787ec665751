// `kpathd diagnose`: attach every probe, watch the host for a while, then tell a person, pathology
// by pathology, what was found, the evidence (numbers, processes, kernel functions, units) and the
// fix from the runbook. The exit status says whether anything was found.
//
// The analysis is a pure function of two collections (at the start and at the end of the watch)
// and the peaks seen in between, so it is unit-tested on synthetic metric families. The rules (one
// a pathology), the report and the watch itself are in daemon/diagnose/.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "daemon/cli.h"
#include "daemon/config.h"
#include "probes/collect/metric_families.h"

namespace kpath {

// What diagnose watched.
struct Observation {
  MetricFamilies first;  // the collection right after every probe attached
  MetricFamilies last;   // the collection at the end of the watch
  double elapsed_seconds = 0;
  double irqoff_max_seconds = 0;  // the longest kpath_irqoff_max_seconds of every collection
  int cpus = 1;                   // online CPUs (per-CPU rates)
  bool interrupted = false;       // stopped early by SIGINT/SIGTERM
  // Events (docs/events.md), one JSON line each: the running kpathd's (its IRQ-off regions of
  // the last hour, the hooks it saw appear and leave) when one answers, else those of the watch.
  std::vector<std::string> events = {};
  std::string events_source = {};  // where `events` came from, for the report
};

// Where a pathology starts to count. The same lines as the alert rules, over a short watch.
struct DiagnoseThresholds {
  double cgroup_creations_per_second = 0.1;  // one unit's cgroups, one every 10 s...
  double cgroup_creations_min = 3;           // ...and at least this many while watching
  double percpu_growth_bytes_per_second = 20 * 1024;
  double percpu_growth_min_seconds = 20;  // a shorter watch cannot tell growth from a step
  double dying_memory_cgroups = 1000;     // and twice the live ones
  double slab_objects_large = 1e6;
  double foreign_bpf_cpus = 0.1;
  double madvise_calls_per_second = 1000;
  double tlb_shootdowns_per_cpu_per_second = 1000;
};

struct Culprit {
  std::map<std::string, std::string> labels;  // comm, unit, caller, culprit, owner, target, ...
  double value = 0;
  std::string unit;  // what value counts: "bytes", "cgroups", "regions", "calls/s", ...
};

struct Finding {
  enum class State { kOk, kFound, kNotChecked };
  std::string id;     // percpu_cgroup_churn, irqoff, slabinfo_readers, foreign_hooks, madvise_tlb
  std::string title;  // "Percpu memory growth and cgroup churn"
  std::string seeds;  // "seed 000"
  State state = State::kOk;
  std::string summary;                // one line
  std::vector<std::string> evidence;  // lines, most telling first
  std::vector<Culprit> culprits;      // the same, structured, for --json
  std::vector<std::string> fixes;     // from the runbooks, with their risks
  std::vector<std::string> runbooks;  // alert names: docs/runbooks/<name>.md
};

struct ProbeStatus {
  std::string probe;
  std::string mechanism;
  bool attached = false;
};

struct Diagnosis {
  double elapsed_seconds = 0;
  bool interrupted = false;
  int cpus = 1;
  std::string kernel_release;
  std::vector<ProbeStatus> probes;
  std::vector<std::string> failing_collectors;
  std::vector<Finding> findings;
  bool AnythingFound() const;
};

Diagnosis Diagnose(const Observation& observation, const DiagnoseThresholds& thresholds = {});
// For a person, read top to bottom.
std::string RenderText(const Diagnosis& diagnosis);
// The same report for scripts: {"found": bool, "findings": [...], ...}.
std::string RenderJson(const Diagnosis& diagnosis);

// Runs `kpathd diagnose` with the daemon's collectors (signals already blocked by the caller:
// SIGINT/SIGTERM end the watch early and still print the report). Returns the exit status:
// 0 nothing found, 1 something found, 2 error.
int RunDiagnose(const CliOptions& cli, Config config);

}  // namespace kpath
