// Seed 002 made continuous: an inventory of the kernel hooks kpathd did not place (kprobes,
// kretprobes, uprobes, tracepoint and raw tracepoint programs, fentry/fexit/LSM trampolines,
// perf-event programs, ftrace users, cgroup and network programs), with their targets, their
// owners (the process holding them, and its systemd unit) and, from the kernel's per-program
// statistics, what the foreign BPF programs cost in CPU. No BPF program of its own: it reads
// debugfs, tracefs, /proc and the bpf syscall's object lists.
//
// The inventory is rebuilt every hooks.refresh_interval; sampling ticks in between serve the last
// one. Everything held by kpathd's own process (the percpu probe's programs and links, say) is
// left out.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/collect/collector.h"
#include "probes/collect/folded_counters.h"
#include "probes/hooks/bpf_holders.h"
#include "probes/hooks/bpf_objects.h"
#include "probes/hooks/bpf_stats_sampler.h"
#include "probes/hooks/debugfs_mount.h"
#include "probes/hooks/hook_events.h"
#include "probes/hooks/hook_inventory.h"
#include "probes/hooks/hook_set_fingerprint.h"
#include "probes/hooks/hooks_config.h"
#include "probes/kernel/kernel_features.h"

namespace kpath {

struct ForeignHookOptions {
  HooksConfig config;
  LabelLimits labels;  // `comm` bounds the owners of kpath_foreign_bpf_run_*
  // List BPF objects through the bpf syscall (bpf.enabled); false: debugfs and tracefs only.
  bool bpf_inventory = true;
  // Allowed to mount debugfs and tracefs (only on the real /sys).
  bool may_mount = false;
};

class ForeignHookInventory final : public Collector {
 public:
  static constexpr std::string_view kName = "foreign_hooks";

  // `kernel`: the one feature cache of the daemon, there with BPF off too (it tells where tracefs
  // is).
  ForeignHookInventory(HostPaths paths, KernelFeatures& kernel, ForeignHookOptions options);
  ~ForeignHookInventory() override;

  std::string_view Name() const override { return kName; }
  absl::Status Start() override;
  absl::Status Collect(MetricFamilies& out) override;
  void Stop() override;
  void SetLabelLimits(const LabelLimits& limits) override;
  void SetEventSink(EventSink* sink) override { events_ = sink; }
  std::string StatusFragment() const override { return status_; }

  // The last inventory (for tests and the STATUS line).
  const HookInventory& inventory() const { return inventory_; }

 private:
  void Refresh();
  TracingSources ReadTracing();
  std::optional<BpfSources> ReadBpf();
  std::string QualifyTracepoint(std::string_view event);
  void AccountCost();
  void AppendFamilies(MetricFamilies& out) const;
  void LogOnce(std::string_view key, const std::string& message);

  HostPaths paths_;
  KernelFeatures& kernel_;
  ForeignHookOptions options_;
  HotTargets hot_;
  DebugfsMount debugfs_;
  BtfNameResolver btf_names_;
  std::unique_ptr<BpfStatsSampler> sampler_;
  int stats_fd_ = -1;  // hooks.bpf_stats: always
  pid_t own_pid_ = 0;

  bool refreshed_ = false;
  std::chrono::steady_clock::time_point next_refresh_;
  HookInventory inventory_;
  HookSetFingerprint fingerprint_;  // of inventory_
  EventSink* events_ = nullptr;     // hooks appearing and leaving
  std::set<HookIdentity> identities_;  // of inventory_, for the next refresh's events
  std::map<std::string, bool> source_available_;
  std::optional<bool> kprobes_enabled_;
  size_t processes_scanned_ = 0;

  // Tracepoint event -> "category:event", from tracefs events/.
  std::map<std::string, std::string, std::less<>> tracepoint_categories_;
  uint64_t categories_built_at_ = 0;  // refresh number of the last build
  uint64_t refreshes_ = 0;

  // Cost: cumulative kernel figures per program at the last refresh, and the exported series.
  std::map<uint32_t, BpfStatsSampler::Reading> last_run_;
  // Labels of every foreign program seen, for slices that outlive the program.
  std::map<uint32_t, std::pair<std::string, std::string>> program_labels_;
  FoldedCounters cost_;
  double stats_fraction_ = 0;  // share of time the statistics were on, for the gauge

  // The last /proc scan, reused while the kernel's BPF objects stay the same (see ReadBpf).
  std::vector<uint32_t> scanned_objects_;
  BpfHolders scanned_holders_;
  int refreshes_since_scan_ = 0;

  std::map<std::string, bool, std::less<>> logged_;
  std::string status_;
};

}  // namespace kpath
