// Percpu allocations (seed 000): who allocates per-CPU memory (process and kernel caller), and
// what the daemon saw allocated and not yet freed, by caller. The latter tells a leak (dying
// memcgs holding their per-CPU statistics) from mere churn.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "probes/collect/bpf_handles.h"
#include "probes/collect/collector.h"
#include "probes/collect/folded_counters.h"
#include "probes/collect/keyed_counter_maps.h"
#include "probes/collect/probe_attacher.h"
#include "probes/kernel/kernel_features.h"
#include "probes/kernel/kernel_symbolizer.h"

struct percpu_bpf;
struct bpf_map;

namespace kpath {

// True for frames that are not the allocation's real caller: the percpu allocator itself and
// the tracing plumbing between the tracepoint and the program (bpf_trace_run*, __bpf_trace_*,
// perf_trace_*, kprobe and ftrace trampolines).
bool IsPercpuPlumbingFrame(std::string_view function);

// The caller of a percpu allocation: the first frame that is not plumbing, "unknown" if none.
// (Frames are __u64, which is unsigned long long, as the BPF side writes them.)
std::string PercpuCallerName(std::span<const unsigned long long> frames, KernelSymbolizer& symbols);

// Where the BPF programs keep live allocations until their free (see percpu.bpf.c).
enum class LiveAllocTracking {
  kNone,     // entry probes (fentry, kprobe): the pointer is not known, frees are not matched
  kTable,    // open-addressing table in an array map, claimed with BPF atomics (Linux 5.12+)
  kHashMap,  // hash map: kernels whose verifier refuses the table's atomics
};
std::string_view LiveAllocTrackingName(LiveAllocTracking tracking);

// A read-only mmap of a BPF array map created with BPF_F_MMAPABLE; unmapped when destroyed.
class MappedArray {
 public:
  static absl::StatusOr<MappedArray> Of(bpf_map* map);
  MappedArray() = default;
  MappedArray(MappedArray&& other) noexcept { *this = std::move(other); }
  MappedArray& operator=(MappedArray&& other) noexcept;
  ~MappedArray();
  const void* data() const { return data_; }
  size_t entries() const { return entries_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t entries_ = 0;
};

struct PercpuProbeOptions {
  std::vector<Mechanism> allowed;  // empty: all, in the probe's order
  LabelLimits labels;
  uint32_t max_tracked_allocations = 65536;  // live allocations tracked at most
  bool caller_from_stack = false;            // name callers from stack samples always
  // false: the hash map even where the kernel takes the table (tests of the fallback).
  bool live_table = true;
};

class PercpuAllocProbe final : public Collector, public AttachableProbe {
 public:
  static constexpr std::string_view kName = "percpu_alloc";
  static constexpr std::string_view kCategory = "percpu";
  static constexpr std::string_view kEvent = "percpu_alloc_percpu";
  static constexpr std::string_view kFreeEvent = "percpu_free_percpu";

  PercpuAllocProbe(KernelFeatures& kernel, HostPaths paths, PercpuProbeOptions options);
  ~PercpuAllocProbe() override;

  // Collector
  std::string_view Name() const override { return kName; }
  absl::Status Start() override;
  absl::Status Collect(MetricFamilies& out) override;
  void Stop() override { Detach(); }
  std::vector<ProbeState> Probes() const override { return {state_}; }
  std::vector<OwnBpfProgram> Programs() const override;
  void SetLabelLimits(const LabelLimits& limits) override;
  std::string StatusFragment() const override { return status_; }

  // AttachableProbe
  std::string_view ProbeName() const override { return kName; }
  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan, KernelFeatures& kernel) override;
  absl::Status Attach(const AttachPlan& plan, KernelFeatures& kernel) override;
  void Detach() override;

 private:
  // Which argument layout the tracepoint has (see percpu.bpf.c).
  enum class Layout { kUnknown, kWithBytesAlloc, kLegacy };
  Layout TracepointLayout(KernelFeatures& kernel);
  // Loads and attaches `plan` with live allocations kept the `tracking` way. On a failed load
  // (not a failed attach), `load_failed` is set.
  absl::Status AttachWith(const AttachPlan& plan, KernelFeatures& kernel,
                          LiveAllocTracking tracking, bool& load_failed);
  absl::Status DrainCounters();
  // Outstanding bytes by caller from the table's live_balance.
  void SumLiveBalance();
  // The function name of a caller word (see percpu.h: a call site or a stack id).
  const std::string& CallerName(uint64_t caller);

  KernelFeatures& kernel_;
  HostPaths paths_;
  PercpuProbeOptions options_;
  ProbeState state_{std::string(kName), Mechanism::kNone, "not started"};
  OwnedSkeleton<percpu_bpf> skel_{nullptr, nullptr};
  std::vector<OwnedLink> links_;
  std::vector<OwnBpfProgram> programs_;
  bool tracks_frees_ = false;
  LiveAllocTracking tracking_ = LiveAllocTracking::kNone;
  MappedArray live_callers_;  // the live_callers map (kTable)
  uint32_t live_epoch_ = 0;   // intervals so far, the table's clock (kTable)
  std::optional<KeyedCounterMaps> alloc_maps_;
  std::optional<KeyedCounterMaps> balance_maps_;

  KernelSymbolizer symbols_;
  std::unordered_map<uint64_t, std::string> caller_names_;
  size_t caller_names_generation_ = 0;
  FoldedCounters allocs_;                       // {comm, caller} -> {allocs, bytes}
  std::map<std::string, int64_t> outstanding_;  // caller -> bytes allocated and not freed
  std::vector<uint64_t> events_;                // enum percpu_event, cumulative
  absl::Time last_collect_ = absl::InfinitePast();
  std::string status_;
};

}  // namespace kpath
