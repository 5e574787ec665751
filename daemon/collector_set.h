// Every collector of the daemon, run in turn on the sampling clock. Adds the daemon-health
// families (build info, probe attachment, collector success and duration, own BPF cost) to what
// the collectors produce. A failing collector affects only its own families.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "probes/collect/bpf_program_stats.h"
#include "probes/collect/collector.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

struct BuildInfo {
  std::string version;
  std::string revision;
  std::string libbpf_version;
  std::string kernel_release;
  static BuildInfo Current();
};

class CollectorSet {
 public:
  CollectorSet(std::vector<std::unique_ptr<Collector>> collectors, BuildInfo build,
               HostPaths paths);
  ~CollectorSet();

  // Starts every collector; failures are logged and reported, never fatal.
  void StartAll();
  // One collection of everything: the families to publish.
  MetricFamilies CollectAll();
  void StopAll();
  // Where every collector's events go (Collector::SetEventSink); before StartAll.
  void SetEventSink(EventSink* sink);
  // Applies reloaded label limits to every collector.
  void SetLabelLimits(const LabelLimits& limits);
  // Calls `fn` with every collector, in order (from the thread that collects).
  void ForEach(const std::function<void(Collector&)>& fn);

  // A BPF probe collector whose Start failed (nothing attached: a tracepoint its module has not
  // brought yet, a transient load error) is started again after `initial`, then after twice as
  // long each time up to `max`; one whose collections fail `failures_before_restart` times in a
  // row (a map it can no longer read, a link the kernel dropped) is started again the same way.
  struct RetryPolicy {
    std::chrono::milliseconds initial{std::chrono::seconds(5)};
    std::chrono::milliseconds max{std::chrono::minutes(5)};
    int failures_before_restart = 3;
  };
  void SetRetryPolicy(RetryPolicy policy) { retry_ = policy; }
  // How often an attached probe's self-test (Collector::SelfTest) runs (bpf.selftest_interval);
  // the first runs with the first collection after the probe attached, and the next after a
  // change of interval (the same interval again changes nothing).
  void SetSelfTestInterval(std::chrono::milliseconds interval) {
    if (interval == selftest_interval_) return;
    selftest_interval_ = interval;
    for (Health& h : health_) h.next_selftest = {};
  }

  // "1/1 probes attached; Percpu 1.8 GiB +340 KiB/s; collector meminfo failing"
  std::string StatusLine() const;
  int ProbesAttached() const;
  // What every BPF probe attached with (kpath_probe_attached), in collector order.
  std::vector<ProbeState> ProbeStates() const;
  // Probes that should be attached: every probe but those off by configuration.
  int ProbesTotal() const;
  std::vector<std::string> ProbesExcludedByConfig() const;

 private:
  struct Health {
    bool started = false;
    bool ok = false;
    bool ever_collected = false;
    double duration_seconds = 0;
    std::string last_error;
    int consecutive_failures = 0;
    int start_attempts = 0;
    std::chrono::steady_clock::time_point next_start;
    std::chrono::milliseconds backoff{0};
    std::optional<bool> selftest_ok;  // nullopt: no result (no canary, or not attached)
    std::string selftest_error;
    std::chrono::steady_clock::time_point next_selftest;
  };

  void AppendHealth(MetricFamilies& out);
  // Starts collector i (again); records the outcome and, on failure, when to try next.
  void StartOne(size_t i);
  // Runs collector i's self-test when due (while a probe of it is attached).
  void SelfTestOne(size_t i);
  // Collectors with BPF probes are retried; /proc samplers have nothing to attach.
  static bool Retryable(const Collector& c) { return !c.Probes().empty(); }
  static bool AllProbesExcludedByConfig(const Collector& c);

  std::vector<std::unique_ptr<Collector>> collectors_;
  std::vector<Health> health_;
  BuildInfo build_;
  HostPaths paths_;
  bool stopped_ = false;
  RetryPolicy retry_;
  OwnBpfRunCost own_cost_;  // kpath_bpf_program_run_seconds_total, exact or sampled
  std::chrono::milliseconds selftest_interval_{std::chrono::minutes(1)};
};

// Joins families of the same name (from different collectors) into one, first HELP wins.
MetricFamilies MergeFamiliesByName(MetricFamilies families);

}  // namespace kpath
