#include "daemon/collector_registry.h"

#include <unistd.h>

#include <algorithm>
#include <iterator>

#include "probes/cgroups/cgroup_churn_probe.h"
#include "probes/cgroups/dying_cgroup_counter.h"
#include "probes/collect/probe_attacher.h"
#include "probes/hooks/foreign_hook_inventory.h"
#include "probes/irqoff/irqoff_probe.h"
#include "probes/madvise/madvise_probe.h"
#include "probes/madvise/tlb_flush_probe.h"
#include "probes/percpu/percpu_probe.h"
#include "probes/procfs/interrupts_collector.h"
#include "probes/procfs/meminfo_collector.h"
#include "probes/procfs/self_process.h"
#include "probes/procfs/stat_collector.h"
#include "probes/slab/slab_collector.h"
#include "probes/slab/slabinfo_readers_probe.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

using Make = std::unique_ptr<Collector> (*)(const Config&, const CollectorEnvironment&);
using Reload = void (*)(Collector&, const Config&);

CollectorRow SamplerRow(std::string_view name, Make make, Reload reload = nullptr,
                        CollectorNeeds needs = {}) {
  CollectorRow row;
  row.name = name;
  row.make = make;
  row.reload = reload;
  row.needs = needs;
  return row;
}

// A BPF probe's row: its name and mechanisms as the probe declares them.
template <typename Probe>
CollectorRow ProbeRow(int probes_key_order, Make make, Reload reload = nullptr,
                      CollectorNeeds needs = {}) {
  CollectorRow row = SamplerRow(Probe::kName, make, reload, needs);
  row.kind = CollectorRow::Kind::kBpfProbe;
  row.mechanisms.assign(std::begin(Probe::kMechanisms), std::end(Probe::kMechanisms));
  row.defaults.assign(std::begin(Probe::kDefaultMechanisms), std::end(Probe::kDefaultMechanisms));
  row.probes_key_order = probes_key_order;
  return row;
}

// probes.<name>.mechanisms as configured (the defaults filled in).
template <typename Probe>
std::vector<Mechanism> Allowed(const Config& config) {
  return config.Probe(Probe::kName).mechanisms;
}

const std::vector<CollectorRow>* MakeRegistry() {
  return new std::vector<CollectorRow>{
      // Memory (/proc/meminfo, seed 000).
      SamplerRow(
          "meminfo",
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            return std::make_unique<MeminfoCollector>(env.paths, config.percpu.growth_window);
          },
          [](Collector& c, const Config& config) {
            static_cast<MeminfoCollector&>(c).SetGrowthWindow(config.percpu.growth_window);
          }),
      // Percpu allocations (seed 000).
      ProbeRow<PercpuAllocProbe>(
          0,
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            return std::make_unique<PercpuAllocProbe>(
                *env.kernel, env.paths,
                PercpuProbeOptions{.allowed = Allowed<PercpuAllocProbe>(config),
                                   .labels = config.labels,
                                   .max_tracked_allocations = config.percpu.max_tracked_allocations,
                                   .caller_from_stack = config.percpu.caller_from_stack,
                                   .pods = env.pods});
          },
          nullptr, {.names_kernel_addresses = true}),
      // madvise storms, TLB shootdowns and the sys/user balance (seed 003).
      ProbeRow<MadviseProbe>(
          2,
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            return std::make_unique<MadviseProbe>(
                *env.kernel, MadviseProbeOptions{.allowed = Allowed<MadviseProbe>(config),
                                                 .labels = config.labels,
                                                 .storm_calls_per_second = static_cast<double>(
                                                     config.madvise.storm_calls_per_second),
                                                 .pods = env.pods});
          },
          [](Collector& c, const Config& config) {
            static_cast<MadviseProbe&>(c).SetStormThreshold(
                static_cast<double>(config.madvise.storm_calls_per_second));
          }),
      ProbeRow<TlbFlushProbe>(
          3,
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            if (!TlbFlushProbe::kArchitectureHasShootdownIpis) {
              spdlog::info(
                  "probe tlb_flush: not made on this architecture: it invalidates other CPUs' "
                  "TLBs with broadcast instructions, not shootdown IPIs, so there are none to "
                  "count; kpath_tlb_flushes_total and kpath_tlb_shootdowns_total are absent");
              return nullptr;
            }
            return std::make_unique<TlbFlushProbe>(*env.kernel, Allowed<TlbFlushProbe>(config));
          }),
      SamplerRow("interrupts",
                 [](const Config&, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
                   return std::make_unique<InterruptsCollector>(env.paths);
                 }),
      SamplerRow("stat",
                 [](const Config&, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
                   return std::make_unique<StatCollector>(env.paths, sysconf(_SC_CLK_TCK));
                 }),
      // kpathd's own cost (process_*): always its own /proc/self, wherever the host's procfs is.
      SamplerRow("process",
                 [](const Config&, const CollectorEnvironment&) -> std::unique_ptr<Collector> {
                   return std::make_unique<SelfProcessCollector>(
                       "/proc/self", "/proc/stat", sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE));
                 }),
      // Cgroup churn by unit, live and dying cgroups (seed 000).
      SamplerRow(DyingCgroupCounter::kName,
                 [](const Config&, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
                   return std::make_unique<DyingCgroupCounter>(env.paths);
                 }),
      ProbeRow<CgroupChurnProbe>(
          1,
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            return std::make_unique<CgroupChurnProbe>(
                *env.kernel, CgroupChurnOptions{.allowed = Allowed<CgroupChurnProbe>(config),
                                                .labels = config.labels,
                                                .churn_window = config.percpu.growth_window,
                                                .burst_per_second = static_cast<double>(
                                                    config.cgroups.churn_burst_per_second),
                                                .pods = env.pods});
          },
          [](Collector& c, const Config& config) {
            static_cast<CgroupChurnProbe&>(c).SetChurnWindow(config.percpu.growth_window);
            static_cast<CgroupChurnProbe&>(c).SetBurstThreshold(
                static_cast<double>(config.cgroups.churn_burst_per_second));
          }),
      // IRQ-disabled regions with their culprit (seeds 001, 004); slab caches read without
      // stalling the host, and who reads /proc/slabinfo (seed 001).
      ProbeRow<IrqOffProbe>(
          4,
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            return std::make_unique<IrqOffProbe>(
                *env.kernel, env.paths, Allowed<IrqOffProbe>(config),
                IrqOffOptions{
                    .detector = config.irqoff, .labels = config.labels, .pods = env.pods});
          },
          nullptr, {.names_kernel_addresses = true, .perf_event_timers = Mechanism::kPerfEvent}),
      SamplerRow(
          "slab",
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            return std::make_unique<SlabCollector>(env.paths, config.slab);
          },
          [](Collector& c, const Config& config) {
            static_cast<SlabCollector&>(c).SetConfig(config.slab);
          }),
      ProbeRow<SlabinfoReadersProbe>(
          5,
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            return std::make_unique<SlabinfoReadersProbe>(
                *env.kernel, Allowed<SlabinfoReadersProbe>(config), config.labels);
          }),
      // Kernel hooks placed by others, their owners and cost (seed 002). Lists BPF objects only
      // when BPF is on; debugfs and tracefs are mounted only on the real /sys.
      SamplerRow(
          ForeignHookInventory::kName,
          [](const Config& config, const CollectorEnvironment& env) -> std::unique_ptr<Collector> {
            if (!config.hooks.enabled) return nullptr;
            return std::make_unique<ForeignHookInventory>(
                env.paths, *env.kernel,
                ForeignHookOptions{.config = config.hooks,
                                   .labels = config.labels,
                                   .bpf_inventory = config.bpf_enabled,
                                   .may_mount = config.sysfs_root == "/sys"});
          },
          nullptr, {.foreign_bpf_inventory = true}),
  };
}

}  // namespace

const std::vector<CollectorRow>& CollectorRegistry() {
  static const std::vector<CollectorRow>* rows = MakeRegistry();
  return *rows;
}

const CollectorRow* FindCollectorRow(std::string_view name) {
  for (const CollectorRow& row : CollectorRegistry()) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

const std::vector<std::string_view>& KnownProbeNames() {
  static const auto* names = [] {
    std::vector<const CollectorRow*> probes;
    for (const CollectorRow& row : CollectorRegistry()) {
      if (row.kind == CollectorRow::Kind::kBpfProbe) probes.push_back(&row);
    }
    std::stable_sort(probes.begin(), probes.end(),
                     [](const CollectorRow* a, const CollectorRow* b) {
                       return a->probes_key_order < b->probes_key_order;
                     });
    auto* out = new std::vector<std::string_view>;
    for (const CollectorRow* row : probes) out->push_back(row->name);
    return out;
  }();
  return *names;
}

const std::vector<Mechanism>& SupportedMechanisms(std::string_view probe) {
  static const auto* none = new std::vector<Mechanism>;
  const CollectorRow* row = FindCollectorRow(probe);
  return row != nullptr && row->kind == CollectorRow::Kind::kBpfProbe ? row->mechanisms : *none;
}

const std::vector<Mechanism>& DefaultMechanisms(std::string_view probe) {
  static const auto* none = new std::vector<Mechanism>;
  const CollectorRow* row = FindCollectorRow(probe);
  return row != nullptr && row->kind == CollectorRow::Kind::kBpfProbe ? row->defaults : *none;
}

ProbeConfig Config::Probe(std::string_view name) const {
  const auto it = probes.find(name);
  ProbeConfig probe = it == probes.end() ? ProbeConfig{} : it->second;
  if (probe.mechanisms.empty()) probe.mechanisms = DefaultMechanisms(name);
  return probe;
}

std::vector<std::unique_ptr<Collector>> MakeCollectors(const Config& config,
                                                       const CollectorEnvironment& env) {
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const CollectorRow& row : CollectorRegistry()) {
    // A BPF probe is made when BPF is on and the probe is enabled; it logs either way.
    if (row.kind == CollectorRow::Kind::kBpfProbe) {
      if (!config.bpf_enabled) continue;
      if (!config.Probe(row.name).enabled) {
        spdlog::info("probe {}: disabled in the configuration", row.name);
        continue;
      }
    }
    if (std::unique_ptr<Collector> collector = row.make(config, env)) {
      collectors.push_back(std::move(collector));
    }
  }
  return collectors;
}

void ReloadCollector(Collector& collector, const Config& config) {
  const CollectorRow* row = FindCollectorRow(collector.Name());
  if (row != nullptr && row->reload != nullptr) row->reload(collector, config);
}

std::unique_ptr<KernelFeatures> KernelFeaturesFor(const Config& config) {
  // Mount tracefs only on the real /sys, never inside a fixture tree. Asked lazily: with BPF off
  // only the foreign-hook inventory asks it (where tracefs is).
  auto kernel = std::make_unique<LiveKernelFeatures>(
      HostPaths(config.procfs_root, config.sysfs_root), config.sysfs_root == "/sys");
  if (config.bpf_enabled) {
    RouteLibbpfLogsToSpdlog();
  } else {
    spdlog::info("bpf.enabled is false: no BPF probe is loaded");
  }
  return kernel;
}

std::unique_ptr<CollectorSet> BuildCollectorSet(const Config& config, KernelFeatures* kernel) {
  CollectorEnvironment env{HostPaths(config.procfs_root, config.sysfs_root), kernel, nullptr};
  if (config.bpf_enabled) {
    std::string why;
    env.pods = MakePodAttribution(config.kubernetes, env.paths, &why);
    spdlog::info("pod labels (namespace, pod, container): {}{}", env.pods ? "on, " : "off: ", why);
  }
  return std::make_unique<CollectorSet>(MakeCollectors(config, env), BuildInfo::Current(),
                                        env.paths);
}

}  // namespace kpath
