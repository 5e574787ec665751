// Every collector kpathd has, one row each: the BPF probes and the /proc and /sys samplers. The
// probe list the configuration accepts (with each probe's mechanisms), how each collector is made
// from the configuration and reloaded, and what it needs once started all derive from these rows.
// Adding a probe is its folder under probes/ and one row in collector_registry.cpp.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "daemon/collector_set.h"
#include "daemon/config.h"
#include "probes/cgroups/kubernetes_pods.h"
#include "probes/collect/collector.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/kernel_features.h"
#include "probes/kernel/mechanism.h"

namespace kpath {

// What collectors are made with.
struct CollectorEnvironment {
  HostPaths paths;
  // The one feature cache (KernelFeaturesFor), also with bpf.enabled false, when no BPF probe is
  // made but the foreign-hook inventory still asks where tracefs is.
  KernelFeatures* kernel = nullptr;
  // Pod labels (kubernetes.pod_labels), shared by the probes that key by process; null when off.
  std::shared_ptr<PodAttribution> pods;
};

// What a collector goes on doing once started, for the capabilities kpathd keeps
// (least_privilege.h).
struct CollectorNeeds {
  // Names kernel addresses (and re-reads kallsyms) once its probe attached.
  bool names_kernel_addresses = false;
  // Keeps per-CPU perf event timers when its probe attached through this mechanism (kNone:
  // through none).
  Mechanism perf_event_timers = Mechanism::kNone;
  // Lists other processes' BPF objects when bpf.enabled.
  bool foreign_bpf_inventory = false;
};

struct CollectorRow {
  enum class Kind {
    kBpfProbe,  // made when bpf.enabled and probes.<name>.enabled; configured under probes:
    kSampler,   // reads /proc or /sys (or tracefs), no BPF program of its own
  };
  // The collector's Name() (the `collector` label) and, for a probe, its key under `probes:`.
  std::string_view name;
  Kind kind = Kind::kSampler;
  // A probe's mechanisms in its order of preference, and the default of
  // probes.<name>.mechanisms: the probe's own kMechanisms and kDefaultMechanisms.
  std::vector<Mechanism> mechanisms;
  std::vector<Mechanism> defaults;
  // Where the probe is listed under `probes:` (kpathd.yaml, and the "valid:" list of errors),
  // which predates this table and is not the order collectors are made in.
  int probes_key_order = 0;
  // Made from the configuration; null when the configuration leaves it out.
  std::unique_ptr<Collector> (*make)(const Config& config,
                                     const CollectorEnvironment& env) = nullptr;
  // Applies a reloaded configuration (label limits apart, which every collector takes); null
  // when nothing of it reloads. Called with a collector this row made.
  void (*reload)(Collector& collector, const Config& config) = nullptr;
  CollectorNeeds needs;
};

// Every row, in the order collectors are made: the order of /metrics and of the STATUS= line.
const std::vector<CollectorRow>& CollectorRegistry();

// The row of the collector named `name`; null for none.
const CollectorRow* FindCollectorRow(std::string_view name);

// Every collector `config` enables, in registry order, not started. Logs each BPF probe the
// configuration disables.
std::vector<std::unique_ptr<Collector>> MakeCollectors(const Config& config,
                                                       const CollectorEnvironment& env);

// Applies a reloaded configuration to a collector made by MakeCollectors.
void ReloadCollector(Collector& collector, const Config& config);

// The kernel features the collectors of `config` ask (lazy: nothing is read until asked).
std::unique_ptr<KernelFeatures> KernelFeaturesFor(const Config& config);

// The collector set of `config`, not started (kpathd and `kpathd diagnose`). `kernel`, from
// KernelFeaturesFor, must outlive the set.
std::unique_ptr<CollectorSet> BuildCollectorSet(const Config& config, KernelFeatures* kernel);

}  // namespace kpath
