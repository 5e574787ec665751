// kpathd's configuration: the YAML file (/etc/kpathd/kpathd.yaml), validated strictly. Built-in
// defaults (a default-constructed Config) equal config/kpathd.yaml; a test pins that.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/web/web_server_config.h"
#include "probes/cgroups/cgroups_config.h"
#include "probes/cgroups/kubernetes_pods.h"
#include "probes/collect/label_limits.h"
#include "probes/hooks/hooks_config.h"
#include "probes/irqoff/irqoff_config.h"
#include "probes/kernel/mechanism.h"
#include "probes/madvise/madvise_config.h"
#include "probes/percpu/percpu_config.h"
#include "probes/slab/slab_config.h"

namespace kpath {

struct ProbeConfig {
  bool enabled = true;
  // Mechanisms the probe may use, in the probe's own order of preference. Empty: all of them.
  std::vector<Mechanism> mechanisms;
  bool operator==(const ProbeConfig&) const = default;
};

struct Config {
  // host:port for /metrics. 9477: outside node_exporter's 9100 (see README, "Port").
  std::string listen_address = "0.0.0.0:9477";
  std::string log_level = "info";  // trace, debug, info, warn, error, critical, off
  absl::Duration sampling_interval = absl::Seconds(5);
  std::string procfs_root = "/proc";
  std::string sysfs_root = "/sys";
  PercpuConfig percpu;    // percpu allocations and meminfo's growth window (seed 000)
  MadviseConfig madvise;  // madvise storms (seed 003)
  CgroupsConfig cgroups;  // cgroup churn bursts (seed 000)
  LabelLimits labels;
  KubernetesConfig kubernetes;  // pod labels (restart to apply)
  bool bpf_enabled = true;      // false: /proc and /sys samplers only, no BPF probe is loaded
  HooksConfig hooks;            // the foreign-hook inventory (seed 002)
  IrqOffConfig irqoff;          // IRQ-disabled regions (seeds 001, 004)
  SlabConfig slab;              // slab cache sizes (seed 001)
  std::map<std::string, ProbeConfig, std::less<>> probes;  // by probe name; absent = defaults
  WebServerConfig web;
  // bpf.selftest_interval: how often each attached probe's canary runs (docs/reliability.md).
  absl::Duration selftest_interval = absl::Minutes(1);

  // The probe's settings, or the defaults when the file does not mention it.
  ProbeConfig Probe(std::string_view name) const;
  bool operator==(const Config&) const = default;
};

// Probe names the configuration accepts under `probes:`. These three and Config::Probe read the
// collector registry (daemon/collector_registry.cpp defines them).
const std::vector<std::string_view>& KnownProbeNames();

// The mechanisms a known probe can attach through, in its order of preference; empty for an
// unknown name.
const std::vector<Mechanism>& SupportedMechanisms(std::string_view probe);

// What an empty ProbeConfig::mechanisms means (Config::Probe fills it in): all the supported
// mechanisms, except where one is too costly to use unasked (the syscall tracepoints of madvise
// and slabinfo_readers).
const std::vector<Mechanism>& DefaultMechanisms(std::string_view probe);

// Parses YAML text. `source` names the file in errors: "<source>:<line>: <what>".
// An empty document gives the defaults. Unknown keys and wrong types are errors.
absl::StatusOr<Config> ParseConfig(std::string_view yaml_text, std::string_view source);

// Reads and parses a file; a missing or unreadable file is an error naming the path.
absl::StatusOr<Config> LoadConfigFile(const std::string& path);

}  // namespace kpath
