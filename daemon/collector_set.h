// Every collector of the daemon, run in turn on the sampling clock. Adds the daemon-health
// families (build info, probe attachment, collector success and duration, own BPF cost) to what
// the collectors produce. A failing collector affects only its own families.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

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
  // Applies reloaded label limits to every collector.
  void SetLabelLimits(const LabelLimits& limits);

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
  };

  void AppendHealth(MetricFamilies& out) const;
  static bool AllProbesExcludedByConfig(const Collector& c);

  std::vector<std::unique_ptr<Collector>> collectors_;
  std::vector<Health> health_;
  BuildInfo build_;
  HostPaths paths_;
  bool stopped_ = false;
};

// Joins families of the same name (from different collectors) into one, first HELP wins.
MetricFamilies MergeFamiliesByName(MetricFamilies families);

}  // namespace kpath
