// Percpu allocations (seed 000): who allocates per-CPU memory (process and kernel caller), and
// what the daemon saw allocated and not yet freed, by caller. The latter tells a leak (dying
// memcgs holding their per-CPU statistics) from mere churn.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "probes/cgroups/kubernetes_pods.h"
#include "probes/collect/bpf_handles.h"
#include "probes/collect/bpf_maps.h"
#include "probes/collect/bpf_probe.h"
#include "probes/collect/folded_counters.h"
#include "probes/collect/keyed_counter_maps.h"
#include "probes/kernel/kernel_features.h"
#include "probes/kernel/kernel_symbolizer.h"
#include "probes/percpu/allocation_log_reader.h"
#include "probes/percpu/percpu_caller.h"

struct percpu_bpf;
struct bpf_map;

namespace kpath {

// Where the BPF programs keep live allocations until their free (see percpu.bpf.c).
enum class LiveAllocTracking {
  kNone,     // entry probes (fentry, kprobe): the pointer is not known, frees are not matched
  kTable,    // open-addressing table in an array map, claimed with BPF atomics (Linux 5.12+)
  kHashMap,  // hash map: kernels whose verifier refuses the table's atomics
  kLog,      // per-CPU allocation logs matched in user space (BPF atomics, mmap-able arrays)
};
std::string_view LiveAllocTrackingName(LiveAllocTracking tracking);

struct PercpuProbeOptions {
  std::vector<Mechanism> allowed;  // empty: all, in the probe's order
  LabelLimits labels;
  uint32_t max_tracked_allocations = 65536;  // live allocations tracked at most
  bool caller_from_stack = false;            // name callers from stack samples always
  // false: the hash map even where the kernel takes the table or the log (tests of the fallback).
  bool live_table = true;
  // false: the table (or the hash map) even where the kernel takes the allocation log.
  bool allocation_log = true;
  uint32_t log_records_bits = 12;  // records per CPU in each allocation log: 2^bits
  absl::Duration log_read_interval = absl::Milliseconds(50);
  // Pod labels on the allocation counters (nullptr: none): probes/cgroups/kubernetes_pods.h.
  std::shared_ptr<PodAttribution> pods;
};

class PercpuAllocProbe final : public BpfProbe {
 public:
  static constexpr std::string_view kName = "percpu_alloc";
  static constexpr std::string_view kCategory = "percpu";
  static constexpr std::array kMechanisms{Mechanism::kTpBtf, Mechanism::kRawTp,
                                          Mechanism::kTracepoint, Mechanism::kFentry,
                                          Mechanism::kKprobe};
  static constexpr std::array kDefaultMechanisms = kMechanisms;
  static constexpr std::string_view kEvent = "percpu_alloc_percpu";
  static constexpr std::string_view kFreeEvent = "percpu_free_percpu";

  PercpuAllocProbe(KernelFeatures& kernel, HostPaths paths, PercpuProbeOptions options);
  ~PercpuAllocProbe() override;

  // Refreshes kallsyms (for callers' names), then attaches.
  absl::Status Start() override;
  absl::Status Collect(MetricFamilies& out) override;
  // Canary: kpathd creates a per-CPU array map (one allocation of PERCPU_SELF_CHECK_SIZE bytes
  // per CPU) and checks that the programs saw its process make it.
  std::optional<absl::Status> SelfTest() override;
  void SetLabelLimits(const LabelLimits& limits) override;
  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan) override;
  absl::Status Attach(const AttachPlan& plan) override;
  void Detach() override;

 private:
  std::string OnAttached() override;
  // Which argument layout the tracepoint has (see percpu.bpf.c).
  enum class Layout { kUnknown, kWithBytesAlloc, kLegacy };
  Layout TracepointLayout();
  // Loads and attaches `plan` with live allocations kept the `tracking` way. On a failed load
  // (not a failed attach), `load_failed` is set.
  absl::Status AttachWith(const AttachPlan& plan, LiveAllocTracking tracking, bool& load_failed);
  absl::Status DrainCounters();
  // Outstanding bytes by caller from the table's live_balance.
  void SumLiveBalance();
  // The function name of a caller word (see percpu.h: a call site or a stack id).
  const std::string& CallerName(uint64_t caller);

  HostPaths paths_;
  PercpuProbeOptions options_;
  OwnedSkeleton<percpu_bpf> skel_{nullptr, nullptr};
  bool tracks_frees_ = false;
  LiveAllocTracking tracking_ = LiveAllocTracking::kNone;
  MappedArray live_callers_;                  // the live_callers map (kTable)
  std::unique_ptr<AllocationLogReader> log_;  // kLog
  uint64_t log_untracked_frees_ = 0;          // kLog: from the matcher
  uint64_t log_not_tracked_ = 0;
  uint32_t live_epoch_ = 0;  // intervals so far, the table's clock (kTable)
  std::optional<KeyedCounterMaps> alloc_maps_;
  std::optional<KeyedCounterMaps> balance_maps_;

  KernelSymbolizer symbols_;
  std::unordered_map<uint64_t, std::string> caller_names_;
  size_t caller_names_generation_ = 0;
  std::vector<size_t> TopN(const LabelLimits& limits) const;  // comm, caller[, pods]
  PodOwnerLabels pod_labels_;  // before allocs_, which takes its label names
  FoldedCounters allocs_;      // {comm, caller[, namespace, pod, container]} -> {allocs, bytes}
  std::map<std::string, int64_t> outstanding_;  // caller -> bytes allocated and not freed
  std::vector<uint64_t> events_;                // enum percpu_event, cumulative
  absl::Time last_collect_ = absl::InfinitePast();
};

}  // namespace kpath
