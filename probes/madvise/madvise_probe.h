// madvise storms (seed 003): every madvise(2) and process_madvise(2) call, counted in the kernel
// by process and advice, exactly. A Go runtime handing memory back with MADV_DONTNEED after each
// GC forced a TLB shootdown on every other CPU per call; these counters name the process and the
// advice without a profiler.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "probes/cgroups/kubernetes_pods.h"
#include "probes/collect/bpf_handles.h"
#include "probes/collect/bpf_probe.h"
#include "probes/collect/folded_counters.h"
#include "probes/collect/keyed_counter_maps.h"
#include "probes/collect/label_limits.h"
#include "probes/collect/label_values.h"
#include "probes/collect/rate_bursts.h"
#include "probes/kernel/kernel_features.h"

struct madvise_bpf;
struct madvise_fentry_bpf;
struct bpf_link;
struct bpf_object;

namespace kpath {

// The contract's name of an enum madvise_advice value (madvise.h): "dontneed", ..., "other".
std::string_view MadviseAdviceName(uint32_t advice);

// The STATUS= fragment for the busiest madvise caller of the last interval: "madvise storm:
// gateway 41.2k calls/s" when its rate reaches `threshold` calls per second, else "".
std::string MadviseStormFragment(std::string_view comm, double calls_per_second, double threshold);

// Where a hooked function finds madvise's (len, behavior).
enum class MadviseArgLayout {
  kSyscallRegs,  // syscall wrapper (__x64_sys_madvise, __arm64_sys_madvise): a pt_regs pointer
  kPlainArgs,    // (start, len, behavior): __se_sys_madvise, sys_madvise, do_madvise before 5.10
  kMmFirst,      // do_madvise(mm, start, len, behavior): since 5.10
};

// The layout of do_madvise from its BTF parameter names; nullopt for a prototype not seen yet.
std::optional<MadviseArgLayout> DoMadviseLayout(const std::vector<std::string>& params);

struct MadviseProbeOptions {
  std::vector<Mechanism> allowed;  // empty: all, in the probe's order
  LabelLimits labels;
  double storm_calls_per_second = 1000;  // STATUS= names a storm from this rate
  // Labels namespace, pod and container (kubernetes.pod_labels); null: no such labels.
  std::shared_ptr<PodAttribution> pods;
};

class MadviseProbe final : public BpfProbe {
 public:
  static constexpr std::string_view kName = "madvise";
  static constexpr std::array kMechanisms{Mechanism::kFentry, Mechanism::kKprobe,
                                          Mechanism::kTracepoint};
  // Not the syscall tracepoint: while attached, every system call of the host takes the
  // syscall-tracing path (an open/close loop keeps ~0.94 of its speed); used only when asked for.
  static constexpr std::array kDefaultMechanisms{Mechanism::kFentry, Mechanism::kKprobe};
  static constexpr std::string_view kImplementation = "do_madvise";
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  MadviseProbe(KernelFeatures& kernel, MadviseProbeOptions options,
               Clock clock = std::chrono::steady_clock::now);
  ~MadviseProbe() override;

  absl::Status Collect(MetricFamilies& out) override;
  // The attach-time check call (CheckHookSeesCalls), repeated: the hook still sees madvise.
  std::optional<absl::Status> SelfTest() override;
  void SetLabelLimits(const LabelLimits& limits) override;
  std::string StatusFragment() const override;
  void SetStormThreshold(double calls_per_second) { storm_threshold_ = calls_per_second; }
  void SetEventSink(EventSink* sink) override { event_sink_ = sink; }

  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan) override;
  absl::Status Attach(const AttachPlan& plan) override;
  void Detach() override;

  // How the process_madvise companion hook attaches for a madvise plan that attached: its
  // target, or why process_madvise is not hooked separately. Public for tests.
  struct Companion {
    std::optional<std::string> target;  // function, or "syscalls:sys_enter_process_madvise"
    std::string reason;                 // when there is no target
  };
  Companion CompanionFor(const AttachPlan& plan);

 private:
  std::string OnAttached() override;
  absl::StatusOr<MadviseArgLayout> FunctionLayout(const std::string& target);
  absl::Status AttachTracepoint(const AttachPlan& plan);
  // The kprobe and fentry plans (madvise_function_hooks.cpp): `Hook` is KprobeHook or
  // FentryHook, whose skeleton is kept in `keep`.
  absl::Status AttachFunction(const AttachPlan& plan);
  template <typename Hook>
  absl::Status AttachFunctionWith(const AttachPlan& plan,
                                  OwnedSkeleton<typename Hook::Skeleton>& keep);
  // After load: find the maps, insert the reserved overflow keys.
  absl::Status AdoptMaps(bpf_object* obj);
  // After an attach: kpathd makes one madvise call of its own (MADVISE_SELF_CHECK_BYTES) and
  // fails the plan unless the programs saw it, so that the next plan is tried.
  absl::Status CheckHookSeesCalls(const AttachPlan& plan);
  // A per-CPU event counter of madvise_events, summed over CPUs.
  absl::StatusOr<uint64_t> EventCount(uint32_t event) const;
  absl::Status InsertReservedKeys();
  std::vector<size_t> TopN(const LabelLimits& limits) const;
  // A key's label values: comm, advice and, with pods, its owner's namespace, pod, container.
  std::vector<std::string> Labels(std::string comm, std::string advice, uint64_t owner);

  MadviseProbeOptions options_;
  std::optional<AttachPlan> attached_plan_;  // for the self-test's words
  Clock clock_;
  OwnedSkeleton<madvise_bpf> tp_skel_{nullptr, nullptr};
  OwnedSkeleton<madvise_fentry_bpf> fentry_skel_{nullptr, nullptr};
  std::string process_madvise_;  // what counts process_madvise, for the log and the detail
  std::optional<KeyedCounterMaps> counts_;
  int buffer_fds_[2] = {-1, -1};
  int events_fd_ = -1;

  PodOwnerLabels pod_labels_;  // before folded_, which takes its label names
  FoldedCounters folded_;      // {comm, advice[, namespace, pod, container]} -> {calls, bytes}
  std::vector<uint64_t> events_;
  std::chrono::steady_clock::time_point last_drain_;
  double storm_threshold_;
  EventSink* event_sink_ = nullptr;  // storms starting and ending
  RateBursts storms_{kMadviseStorms};
  std::string top_comm_;  // the last interval's busiest caller and its rate
  double top_calls_per_second_ = 0;
};

}  // namespace kpath
