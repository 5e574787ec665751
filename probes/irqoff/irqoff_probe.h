// IRQ-disabled regions (seeds 001 and 004): how long, on which CPU, in which process, and which
// kernel function held IRQs off. See irqoff.bpf.c for the three ways of measuring them; this
// class picks the most precise one the kernel offers, keeps a timer on every online CPU, and
// turns the kernel's events into metrics, a STATUS fragment and one log line per interval.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "probes/collect/bpf_handles.h"
#include "probes/collect/bpf_probe.h"
#include "probes/collect/folded_counters.h"
#include "probes/collect/label_limits.h"
#include "probes/collect/windowed_max.h"
#include "probes/irqoff/irqoff_config.h"
#include "probes/irqoff/irqoff_events.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/hypervisor.h"
#include "probes/kernel/kernel_features.h"
#include "probes/kernel/kernel_symbolizer.h"

struct bpf_object;
struct bpf_link;
struct bpf_program;
struct ring_buffer;
struct perf_buffer;
struct irqoff_bpf;
struct irqoff_kvm_steal_bpf;

namespace kpath {

struct IrqOffOptions {
  IrqOffConfig detector;
  LabelLimits labels;  // comm, and caller for the culprit
  // Each region's pod in its event (kubernetes.pod_labels); null: none.
  std::shared_ptr<PodAttribution> pods;
};

// How regions are measured, by precision (what kpath_irqoff_detector_info{method} says).
enum class IrqOffMethod { kNone, kPreemptIrq, kNmi, kSoftwareTimer };
std::string_view IrqOffMethodName(IrqOffMethod method);

class IrqOffProbe final : public BpfProbe {
 public:
  static constexpr std::string_view kName = "irqoff";
  // preemptirq tracepoints (exact), then perf_event: NMI sampling, else software timers.
  static constexpr std::array kMechanisms{Mechanism::kTpBtf, Mechanism::kRawTp,
                                          Mechanism::kTracepoint, Mechanism::kPerfEvent};
  static constexpr std::array kDefaultMechanisms = kMechanisms;

  IrqOffProbe(KernelFeatures& kernel, HostPaths paths, std::vector<Mechanism> allowed,
              IrqOffOptions options);
  ~IrqOffProbe() override;

  // Checks the threshold against the period, then attaches.
  absl::Status Start() override;
  absl::Status Collect(MetricFamilies& out) override;
  void SetLabelLimits(const LabelLimits& labels) override;
  void SetEventSink(EventSink* sink) override { events_ = sink; }
  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan) override;
  absl::Status Attach(const AttachPlan& plan) override;
  void Detach() override;

  IrqOffMethod method() const { return method_; }
  bool steal_correction() const { return steal_correction_; }
  // What the other CPUs' ticks read of a CPU whose tick is overdue (irqoff.h,
  // irqoff_cpu_watch): its preempt count and KVM's preempted flag, or the flag alone (a kernel
  // whose spinlocks do not count), or nothing (one CPU, or no BTF to find per-CPU data).
  enum class Witness { kNone, kKvmPreempted, kPreemptCount };
  Witness witness() const { return witness_; }
  std::string_view WitnessName() const;
  // The context-switch hook, as the log and kpath_irqoff_detector_info name it.
  std::string_view SwitchHookName() const;
  // Late ticks of a CPU and its neighbours together on a VM: "ignored" (a VM,
  // irqoff.ignore_vm_pauses), "counted" (a VM, the option off) or "none" (no hypervisor found: bare
  // metal).
  std::string_view VmPausesName() const;

 private:
  // comm, culprit and, with pods, namespace, pod and container.
  std::vector<size_t> TopN(const LabelLimits& labels) const;
  using Link = OwnedLink;
  // A perf event fd and the BPF link on it (the link owns the fd once made).
  struct PerfAttachment {
    int fd = -1;
    Link link;
  };
  struct CpuTimers {
    PerfAttachment tick;
    PerfAttachment nmi;
  };
  // Helpers that sharpen the timer methods; each optional.
  enum class SwitchHook { kNone, kTpBtf, kTracepoint };
  // The programs Load chose from the skeleton (null: not loaded).
  struct ChosenPrograms {
    bpf_program* disable = nullptr;  // preemptirq
    bpf_program* enable = nullptr;
    bpf_program* tick = nullptr;  // timer methods, on each CPU's perf events
    bpf_program* nmi = nullptr;
    bpf_program* idle = nullptr;  // helpers
    bpf_program* sched_switch = nullptr;
  };

  std::string OnAttached() override;
  IrqOffMethod MethodOf(const AttachPlan& plan) const;
  std::string SoftwareTarget() const;
  std::string NmiTarget() const;
  template <typename Skeleton>
  absl::Status Load(Skeleton* skel, IrqOffMethod method, Mechanism mechanism, bool with_helpers);
  absl::Status LoadAny(IrqOffMethod method, Mechanism mechanism);
  // irqoff_timers.cpp: a timer on every online CPU, and on CPUs as they come and go.
  absl::Status AttachTimers();
  absl::Status AttachCpu(int cpu);
  void DetachCpu(int cpu);
  void RefreshCpus();
  // irqoff_events.cpp: the buffer the regions' records arrive in.
  absl::Status OpenEventBuffer();
  absl::Status DrainEvents();
  // Decodes the drained records and counts them by comm and culprit (`events_lost`: the records
  // the buffer had no room for, so far), logs the longest and sets the STATUS fragment.
  void CountRegions(uint64_t events_lost);
  absl::Status ReadIntervalMax(double& seconds);

  HostPaths paths_;
  IrqOffOptions options_;

  IrqOffMethod method_ = IrqOffMethod::kNone;
  bool steal_correction_ = false;
  Witness witness_ = Witness::kNone;
  std::optional<Hypervisor> hypervisor_;  // asked once, when the probe is made
  bool vm_pause_rule_ = false;            // the BPF tick program applies it (irqoff.bpf.c)
  bool idle_hook_ = false;
  SwitchHook switch_hook_ = SwitchHook::kNone;
  OwnedSkeleton<irqoff_bpf> plain_{nullptr, nullptr};
  OwnedSkeleton<irqoff_kvm_steal_bpf> steal_{nullptr, nullptr};
  bpf_object* obj_ = nullptr;  // of plain_ or steal_
  ChosenPrograms progs_;
  std::map<int, CpuTimers> cpus_;
  std::map<int, uint32_t> generations_;
  std::map<int, std::string> cpu_errors_;  // last attach error per CPU, logged on change
  ring_buffer* ring_ = nullptr;
  perf_buffer* perf_ = nullptr;
  int totals_fd_ = -1;
  int max_fd_ = -1;
  int epoch_fd_ = -1;
  int generation_fd_ = -1;
  uint32_t epoch_ = 0;

  std::unique_ptr<KernelSymbolizer> symbolizer_;
  std::vector<irqoff_event> drained_events_;  // filled by the buffer callbacks
  EventSink* events_ = nullptr;               // each region, as an event
  FoldedCounters regions_;
  uint64_t events_lost_seen_ = 0;
  // Each sample's maximum over irqoff.max_window: what kpath_irqoff_max_seconds exports.
  WindowedMax longest_;
};

}  // namespace kpath
