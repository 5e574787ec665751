// IRQ-disabled regions (seeds 001 and 004): how long, on which CPU, in which process, and which
// kernel function held IRQs off. See irqoff.bpf.c for the three ways of measuring them; this
// class picks the most precise one the kernel offers, keeps a timer on every online CPU, and
// turns the kernel's events into metrics, a STATUS fragment and one log line per interval.
#pragma once

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
#include "probes/collect/collector.h"
#include "probes/collect/folded_counters.h"
#include "probes/collect/label_limits.h"
#include "probes/collect/probe_attacher.h"
#include "probes/irqoff/irqoff_config.h"
#include "probes/irqoff/irqoff_kernel.h"
#include "probes/irqoff/kernel_stack_symbolizer.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/kernel_features.h"

struct bpf_object;
struct bpf_link;
struct bpf_program;
struct ring_buffer;
struct perf_buffer;
struct irqoff_bpf;
struct irqoff_kvm_steal_bpf;
struct irqoff_event;

namespace kpath {

struct IrqOffOptions {
  IrqOffConfig detector;
  LabelLimits labels;  // comm, and caller for the culprit
};

// How regions are measured, by precision (what kpath_irqoff_detector_info{method} says).
enum class IrqOffMethod { kNone, kPreemptIrq, kNmi, kSoftwareTimer };
std::string_view IrqOffMethodName(IrqOffMethod method);

// A region as reported: the event symbolized.
struct IrqOffRegion {
  double seconds = 0;
  int cpu = -1;
  uint32_t pid = 0;
  std::string comm;
  std::string culprit;
  std::vector<std::string> frames;  // innermost first; "0x..." where unknown
  bool task_switched = false;       // the interrupt landed in a later thread (see irqoff.h)
  bool user_mode = false;           // the interrupt landed in user code
};

// Builds the region from a raw event (pure but for the symbolizer).
IrqOffRegion RegionFromEvent(const irqoff_event& event, KernelStackSymbolizer& symbolizer);

// "23.1 ms on CPU 1 in ss (pid 4242), culprit get_slabinfo; stack: a <- b <- c"
std::string DescribeRegion(const IrqOffRegion& region);

class IrqOffProbe final : public Collector, public AttachableProbe {
 public:
  static constexpr std::string_view kName = "irqoff";

  // `irq_kernel`: what else the probe asks the kernel (LiveIrqOffKernel, or a fake in tests).
  IrqOffProbe(KernelFeatures& kernel, std::unique_ptr<IrqOffKernel> irq_kernel, HostPaths paths,
              std::vector<Mechanism> allowed, IrqOffOptions options);
  ~IrqOffProbe() override;

  // Collector
  std::string_view Name() const override { return kName; }
  absl::Status Start() override;
  absl::Status Collect(MetricFamilies& out) override;
  void Stop() override { Detach(); }
  std::vector<ProbeState> Probes() const override { return {state_}; }
  std::vector<OwnBpfProgram> Programs() const override;
  void SetLabelLimits(const LabelLimits& labels) override;
  std::string StatusFragment() const override { return status_; }

  // AttachableProbe
  std::string_view ProbeName() const override { return kName; }
  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan, KernelFeatures& kernel) override;
  absl::Status Attach(const AttachPlan& plan, KernelFeatures& kernel) override;
  void Detach() override;

  IrqOffMethod method() const { return method_; }
  bool steal_correction() const { return steal_correction_; }

 private:
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

  IrqOffMethod MethodOf(const AttachPlan& plan) const;
  std::string SoftwareTarget() const;
  std::string NmiTarget() const;
  template <typename Skeleton>
  absl::Status Load(Skeleton* skel, IrqOffMethod method, Mechanism mechanism, bool with_helpers,
                    KernelFeatures& kernel);
  absl::Status LoadAny(IrqOffMethod method, Mechanism mechanism, KernelFeatures& kernel);
  absl::Status AttachProgram(const char* name);
  absl::Status AttachCpu(int cpu);
  void DetachCpu(int cpu);
  void RefreshCpus();
  absl::Status DrainEvents();
  void OnEvent(const irqoff_event& event);
  absl::Status ReadIntervalMax(double& seconds);

  KernelFeatures& kernel_;
  std::unique_ptr<IrqOffKernel> irq_kernel_owned_;
  IrqOffKernel& irq_kernel_;
  HostPaths paths_;
  std::vector<Mechanism> allowed_;
  IrqOffOptions options_;
  ProbeState state_{std::string(kName), Mechanism::kNone, "not started"};

  IrqOffMethod method_ = IrqOffMethod::kNone;
  bool steal_correction_ = false;
  bool idle_hook_ = false;
  SwitchHook switch_hook_ = SwitchHook::kNone;
  OwnedSkeleton<irqoff_bpf> plain_{nullptr, nullptr};
  OwnedSkeleton<irqoff_kvm_steal_bpf> steal_{nullptr, nullptr};
  bpf_object* obj_ = nullptr;  // of plain_ or steal_
  std::vector<Link> links_;
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

  std::unique_ptr<KernelStackSymbolizer> symbolizer_;
  std::vector<irqoff_event> drained_events_;  // filled by the buffer callbacks
  FoldedCounters regions_;
  uint64_t events_lost_seen_ = 0;
  std::string status_;
};

}  // namespace kpath
