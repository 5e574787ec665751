#include "probes/irqoff/irqoff_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "irqoff.legacy.skel.h"
#include "irqoff.skel.h"
#if KPATH_IRQOFF_KVM_STEAL_OBJECT
#include "irqoff_kvm_steal.skel.h"
#endif
#include "probes/collect/bpf_maps.h"
#include "probes/collect/bpf_skeleton.h"
#include "probes/collect/health_metrics.h"
#include "probes/irqoff/culprit.h"
#include "probes/irqoff/irqoff.h"
#include "probes/irqoff/irqoff_metrics.h"
#include "probes/irqoff/irqoff_totals_families.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

constexpr std::string_view kPreemptIrqTarget = "preemptirq:irq_disable/irq_enable";
// The KVM steal-time object is built for x86_64 only (probes/irqoff/CMakeLists.txt).
constexpr bool kKvmStealObject = KPATH_IRQOFF_KVM_STEAL_OBJECT;
}  // namespace

std::string_view IrqOffMethodName(IrqOffMethod method) {
  switch (method) {
    case IrqOffMethod::kPreemptIrq:
      return "preemptirq";
    case IrqOffMethod::kNmi:
      return "nmi";
    case IrqOffMethod::kSoftwareTimer:
      return "software_timer";
    case IrqOffMethod::kNone:
      break;
  }
  return "none";
}

IrqOffProbe::IrqOffProbe(KernelFeatures& kernel, HostPaths paths, std::vector<Mechanism> allowed,
                         IrqOffOptions options)
    : BpfProbe(kName, kernel, std::move(allowed)),
      paths_(std::move(paths)),
      options_(options),
      hypervisor_(DetectHypervisor(paths_)),
      regions_(WithPodLabelNames({"comm", "culprit"}, options.pods != nullptr),
               TopN(options.labels), 1),
      longest_(options.detector.max_window) {}

IrqOffProbe::~IrqOffProbe() { Detach(); }

std::string IrqOffProbe::SoftwareTarget() const {
  return fmt::format("cpu-clock every {}", FormatMs(options_.detector.period));
}

std::string IrqOffProbe::NmiTarget() const {
  return fmt::format("cycles NMI + cpu-clock every {}", FormatMs(options_.detector.period));
}

std::vector<AttachPlan> IrqOffProbe::Plans() const {
  return PlansFor(kMechanisms, kDefaultMechanisms, [this](Mechanism m) {
    if (m == Mechanism::kPerfEvent) return std::vector<std::string>{NmiTarget(), SoftwareTarget()};
    return std::vector<std::string>{std::string(kPreemptIrqTarget)};
  });
}

IrqOffMethod IrqOffProbe::MethodOf(const AttachPlan& plan) const {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
    case Mechanism::kRawTp:
    case Mechanism::kTracepoint:
      return IrqOffMethod::kPreemptIrq;
    case Mechanism::kPerfEvent:
      return plan.target.starts_with("cycles") ? IrqOffMethod::kNmi : IrqOffMethod::kSoftwareTimer;
    default:
      return IrqOffMethod::kNone;
  }
}

absl::Status IrqOffProbe::Supported(const AttachPlan& plan) {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      if (!kernel_.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel_.BtfTracepointArgs("irq_disable") || !kernel_.BtfTracepointArgs("irq_enable")) {
        return absl::NotFoundError(
            "tracepoints not in BTF (kernel without CONFIG_PREEMPTIRQ_TRACEPOINTS)");
      }
      return absl::OkStatus();
    case Mechanism::kRawTp:
      if (!kernel_.TracepointExists("preemptirq", "irq_disable") ||
          !kernel_.TracepointExists("preemptirq", "irq_enable")) {
        return absl::NotFoundError(
            "kernel has no such tracepoints (CONFIG_PREEMPTIRQ_TRACEPOINTS is off)");
      }
      return absl::OkStatus();
    case Mechanism::kTracepoint:
      for (std::string_view event : {"irq_disable", "irq_enable"}) {
        absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint("preemptirq", event);
        if (!format.ok()) return format.status();
        if (!format->Find("caller_offs") || !format->Find("parent_offs")) {
          return absl::NotFoundError("format has no caller_offs/parent_offs");
        }
      }
      return absl::OkStatus();
    case Mechanism::kPerfEvent: {
      if (absl::Status s = kernel_.SoftwareCpuClock(); !s.ok()) return s;
      if (MethodOf(plan) == IrqOffMethod::kNmi) return kernel_.HardwareNmiSampling();
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

template <typename Skeleton>
absl::Status IrqOffProbe::Load(Skeleton* skel, IrqOffMethod method, Mechanism mechanism,
                               bool with_helpers) {
  skel->rodata->period_ns = static_cast<__u64>(absl::ToInt64Nanoseconds(options_.detector.period));
  skel->rodata->threshold_ns =
      static_cast<__u64>(absl::ToInt64Nanoseconds(options_.detector.threshold));
  const bool ring = kernel_.HasRingBuffer();
  skel->rodata->use_ringbuf = ring ? 1 : 0;
  if (!ring) {
    // The map must still be created for the object to load: make it a one-slot array.
    bpf_map__set_type(skel->maps.irqoff_events, BPF_MAP_TYPE_ARRAY);
    bpf_map__set_key_size(skel->maps.irqoff_events, sizeof(__u32));
    bpf_map__set_value_size(skel->maps.irqoff_events, sizeof(__u32));
    bpf_map__set_max_entries(skel->maps.irqoff_events, 1);
  }
  absl::StatusOr<size_t> ncpus = PossibleCpus();
  if (!ncpus.ok()) return ncpus.status();
  bpf_map__set_max_entries(skel->maps.irqoff_cpu_generation, static_cast<__u32>(*ncpus));
  bpf_map__set_max_entries(skel->maps.irqoff_cpu_watch, static_cast<__u32>(*ncpus));
  skel->rodata->cpu_count = static_cast<__u32>(*ncpus);
  vm_pause_rule_ = method != IrqOffMethod::kPreemptIrq && hypervisor_ &&
                   options_.detector.ignore_vm_pauses && *ncpus > 1;
  skel->rodata->vm_pause_rule = vm_pause_rule_ ? 1 : 0;
  witness_ = Witness::kNone;
  if (method != IrqOffMethod::kPreemptIrq && *ncpus > 1) {
    const PercpuLayout& percpu = kernel_.Layout().Percpu();
    if (percpu.located()) {
      skel->rodata->task_cfs_rq_offset = *percpu.task_cfs_rq;
      skel->rodata->cfs_rq_rq_offset = *percpu.cfs_rq_rq;
      skel->rodata->percpu_runqueues = *percpu.runqueues;
      if (percpu.steal_time) skel->rodata->percpu_steal_time = *percpu.steal_time;
      if (percpu.preempt_count) skel->rodata->percpu_preempt_count = *percpu.preempt_count;
      skel->rodata->preempt_count_reliable = percpu.preempt_count_counts_locks ? 1 : 0;
      witness_ = percpu.preempt_count && percpu.preempt_count_counts_locks ? Witness::kPreemptCount
                 : percpu.steal_time                                       ? Witness::kKvmPreempted
                                                                           : Witness::kNone;
    }
  }

  ChosenPrograms progs;
  if (method == IrqOffMethod::kPreemptIrq) {
    switch (mechanism) {
      case Mechanism::kTpBtf:
        progs.disable = skel->progs.irqoff_disable_tp_btf;
        progs.enable = skel->progs.irqoff_enable_tp_btf;
        break;
      case Mechanism::kRawTp:
        progs.disable = skel->progs.irqoff_disable_raw_tp;
        progs.enable = skel->progs.irqoff_enable_raw_tp;
        break;
      default: {
        absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint("preemptirq", "irq_disable");
        if (!format.ok()) return format.status();
        const TracepointField* caller = format->Find("caller_offs");
        const TracepointField* parent = format->Find("parent_offs");
        if (!caller || !parent) return absl::NotFoundError("format has no caller_offs");
        absl::StatusOr<std::string> text = ReadFileToString(paths_.Proc("kallsyms"));
        if (!text.ok()) return text.status();
        absl::StatusOr<KallsymsOutsideVmlinux> syms = ParseKallsymsOutsideVmlinux(*text);
        if (!syms.ok()) return syms.status();
        if (syms->text_begin == 0) {
          return absl::NotFoundError("no _stext in kallsyms (offsets cannot be resolved)");
        }
        skel->rodata->stext = syms->text_begin;
        skel->rodata->tp_caller_offset = caller->offset;
        skel->rodata->tp_caller_size = caller->size;
        skel->rodata->tp_parent_offset = parent->offset;
        skel->rodata->tp_parent_size = parent->size;
        progs.disable = skel->progs.irqoff_disable_tracepoint;
        progs.enable = skel->progs.irqoff_enable_tracepoint;
      }
    }
  } else {
    progs.tick = skel->progs.irqoff_tick;
    if (method == IrqOffMethod::kNmi) progs.nmi = skel->progs.irqoff_nmi;
  }

  idle_hook_ = false;
  switch_hook_ = SwitchHook::kNone;
  if (with_helpers) {
    if (kernel_.TracepointExists("power", "cpu_idle")) {
      progs.idle = skel->progs.irqoff_cpu_idle_raw_tp;
      idle_hook_ = true;
    }
    if (method != IrqOffMethod::kPreemptIrq) {
      const bool switch_has_prev =
          kernel_.HasVmlinuxBtf() && kernel_.Layout().Tracepoints().SchedSwitchHasPrev();
      const TaskStructLayout& task = kernel_.Layout().Task();
      if (switch_has_prev && task.pid && task.comm) {
        skel->rodata->task_pid_offset = *task.pid;
        skel->rodata->task_comm_offset = *task.comm;
        progs.sched_switch = skel->progs.irqoff_sched_switch_tp_btf;
        switch_hook_ = SwitchHook::kTpBtf;
      } else if (absl::StatusOr<TracepointFormat> format =
                     kernel_.Tracepoint("sched", "sched_switch");
                 format.ok() && format->Find("prev_comm") && format->Find("prev_pid")) {
        skel->rodata->tp_prev_comm_offset = format->Find("prev_comm")->offset;
        skel->rodata->tp_prev_pid_offset = format->Find("prev_pid")->offset;
        progs.sched_switch = skel->progs.irqoff_sched_switch_tracepoint;
        switch_hook_ = SwitchHook::kTracepoint;
      }
    }
  }
  EnableOnly(skel->obj,
             {progs.disable, progs.enable, progs.tick, progs.nmi, progs.idle, progs.sched_switch});
  int err = bpf_object__load(skel->obj);
  if (err) return LibbpfError("load", err);
  if (absl::Status s = FillTunablesMap(skel->obj); !s.ok()) return s;
  progs_ = progs;
  return absl::OkStatus();
}

absl::Status IrqOffProbe::LoadAny(IrqOffMethod method, Mechanism mechanism) {
  std::vector<std::string> failures;
  // Steal correction only matters to the timer methods; its object loads only where the kernel
  // resolves KVM's steal_time (else the plain object is used).
  const bool try_steal =
      kKvmStealObject && method != IrqOffMethod::kPreemptIrq && kernel_.KvmStealTimeReadable();
  // Without the ksym, the plain object reads it through the per-CPU area (Load sets that up).
  for (bool steal : {true, false}) {
    if (steal && !try_steal) continue;
    // Helpers (idle and context-switch hooks) first; without them if they keep it from loading.
    for (bool helpers : {true, false}) {
      absl::Status loaded;
      if (steal) {
#if KPATH_IRQOFF_KVM_STEAL_OBJECT
        OwnedSkeleton<irqoff_kvm_steal_bpf> skel(irqoff_kvm_steal_bpf__open(),
                                                 irqoff_kvm_steal_bpf__destroy);
        if (!skel) return LibbpfError("open", errno);
        loaded = Load(skel.get(), method, mechanism, helpers);
        if (loaded.ok()) {
          obj_ = skel->obj;
          steal_ = std::move(skel);
        }
#endif
      } else {
        OwnedSkeleton<irqoff_bpf> skel = KPATH_OPEN_SKELETON(irqoff, kernel_.HasBpfGlobalData());
        if (!skel) return LibbpfError("open", errno);
        loaded = Load(skel.get(), method, mechanism, helpers);
        if (loaded.ok()) {
          obj_ = skel->obj;
          plain_ = std::move(skel);
        }
      }
      if (loaded.ok()) {
        steal_correction_ =
            steal || (method != IrqOffMethod::kPreemptIrq && witness_ != Witness::kNone &&
                      kernel_.Layout().Percpu().steal_time.has_value());
        if (!failures.empty()) {
          spdlog::info("probe irqoff: loaded after: {}", fmt::join(failures, "; "));
        }
        return absl::OkStatus();
      }
      failures.push_back(fmt::format("{}{}: {}", steal ? "with KVM steal time" : "plain",
                                     helpers ? " with idle/switch hooks" : "",
                                     std::string(loaded.message())));
    }
  }
  return absl::InternalError(fmt::format("{}", fmt::join(failures, "; ")));
}

absl::Status IrqOffProbe::Attach(const AttachPlan& plan) {
  Detach();
  IrqOffMethod method = MethodOf(plan);
  if (method == IrqOffMethod::kNone) return absl::UnimplementedError("mechanism not offered");
  if (absl::Status s = LoadAny(method, plan.mechanism); !s.ok()) {
    Detach();
    return s;
  }
  auto fail = [&](absl::Status s) {
    Detach();
    return s;
  };
  totals_fd_ = MapFd(obj_, "irqoff_totals");
  max_fd_ = MapFd(obj_, "irqoff_max");
  epoch_fd_ = MapFd(obj_, "irqoff_epoch");
  generation_fd_ = MapFd(obj_, "irqoff_cpu_generation");
  if (totals_fd_ < 0 || max_fd_ < 0 || epoch_fd_ < 0 || generation_fd_ < 0) {
    return fail(absl::InternalError("irqoff maps missing from the object"));
  }

  if (absl::Status s = AttachAndRemember({progs_.disable, progs_.enable}, plan); !s.ok()) {
    return fail(s);
  }
  // Helpers: without them the timer methods still work, with more idle or attribution errors.
  if (idle_hook_) {
    if (absl::Status s = AttachAndRemember({progs_.idle}, plan); !s.ok()) {
      spdlog::warn(
          "probe irqoff: idle hook power:cpu_idle not attached ({}); idle CPUs are told "
          "apart by the idle task only",
          std::string(s.message()));
      idle_hook_ = false;
    }
  }
  if (switch_hook_ != SwitchHook::kNone) {
    if (absl::Status s = AttachAndRemember({progs_.sched_switch}, plan); !s.ok()) {
      spdlog::warn(
          "probe irqoff: sched:sched_switch hook not attached ({}); regions are "
          "attributed to the thread the late tick interrupted",
          std::string(s.message()));
      switch_hook_ = SwitchHook::kNone;
    }
  }
  method_ = method;

  if (method != IrqOffMethod::kPreemptIrq) {
    if (absl::Status s = AttachTimers(); !s.ok()) return fail(s);
  }
  if (absl::Status s = OpenEventBuffer(); !s.ok()) return fail(s);
  if (!symbolizer_) {
    symbolizer_ = std::make_unique<KernelSymbolizer>(paths_, kernel_.Kallsyms());
  }
  // Every program loaded, those on the CPUs' perf events and helpers that did not attach too.
  programs_ = LoadedPrograms(kName, obj_);
  return absl::OkStatus();
}

void IrqOffProbe::Detach() {
  if (ring_) ring_buffer__free(ring_);
  ring_ = nullptr;
  if (perf_) perf_buffer__free(perf_);
  perf_ = nullptr;
  std::vector<int> cpus;
  for (const auto& [cpu, timers] : cpus_) cpus.push_back(cpu);
  for (int cpu : cpus) DetachCpu(cpu);
  BpfProbe::Detach();
  plain_.reset();
  steal_.reset();
  obj_ = nullptr;
  progs_ = {};
  totals_fd_ = max_fd_ = epoch_fd_ = generation_fd_ = -1;
  method_ = IrqOffMethod::kNone;
}

absl::Status IrqOffProbe::Start() {
  if (options_.detector.threshold < 2 * options_.detector.period) {
    state_ =
        ProbeState{std::string(kName), Mechanism::kNone, "threshold must be at least 2 x period"};
    return absl::InvalidArgumentError(state_.detail);
  }
  return BpfProbe::Start();
}

std::string IrqOffProbe::OnAttached() {
  std::string resolution =
      method_ == IrqOffMethod::kPreemptIrq
          ? "exact lengths"
          : fmt::format("resolution +-{}: regions shorter than that may be missed",
                        FormatMs(options_.detector.period / 2));
  spdlog::info(
      "probe irqoff: measuring with {} ({}), reporting regions of {} or more; steal-time "
      "correction {}, witness {}, idle hook {}, context-switch hook {}",
      IrqOffMethodName(method_), resolution, FormatMs(options_.detector.threshold),
      steal_correction_ ? "kvm"
      : kKvmStealObject ? "none"
                        : "none (KVM steal time is read on x86_64 only)",
      WitnessName(), idle_hook_ ? "power:cpu_idle" : "none", SwitchHookName());
  if (hypervisor_ && method_ != IrqOffMethod::kPreemptIrq) {
    spdlog::info(
        "probe irqoff: on a virtual machine ({}: {}): late ticks of a CPU and its neighbours "
        "together "
        "are {}",
        hypervisor_->name, hypervisor_->evidence,
        VmPausesName() == "ignored"
            ? "a pause of the VM, counted as ignored late ticks (reason vm_pause)"
            : "counted as regions (irqoff.ignore_vm_pauses is off)");
  }
  return {};
}

std::string_view IrqOffProbe::VmPausesName() const {
  if (!hypervisor_ || method_ == IrqOffMethod::kPreemptIrq) return "none";
  return vm_pause_rule_ ? "ignored" : "counted";
}

std::string_view IrqOffProbe::WitnessName() const {
  switch (witness_) {
    case Witness::kPreemptCount:
      return "preempt_count";
    case Witness::kKvmPreempted:
      return "kvm_preempted";
    case Witness::kNone:
      break;
  }
  return "none";
}

std::string_view IrqOffProbe::SwitchHookName() const {
  switch (switch_hook_) {
    case SwitchHook::kTpBtf:
      return "tp_btf";
    case SwitchHook::kTracepoint:
      return "tracepoint";
    case SwitchHook::kNone:
      break;
  }
  return "none";
}

void IrqOffProbe::SetLabelLimits(const LabelLimits& labels) {
  options_.labels = labels;
  regions_.SetTopN(TopN(labels));
}

std::vector<size_t> IrqOffProbe::TopN(const LabelLimits& labels) const {
  // The pod of the task that held IRQs off: its namespace and container within the pods' budget.
  return WithPodLabelTopN({static_cast<size_t>(labels.comm), static_cast<size_t>(labels.caller)},
                          labels.pod, options_.pods != nullptr);
}

absl::Status IrqOffProbe::ReadIntervalMax(double& seconds) {
  // Programs write slot (epoch & 1). Flip, let a program that read the old epoch finish (they
  // run for microseconds, in interrupt context), then read and clear the old slot.
  __u32 zero = 0;
  uint32_t old = epoch_;
  uint32_t next = old + 1;
  if (bpf_map_update_elem(epoch_fd_, &zero, &next, BPF_ANY) != 0) {
    return LibbpfError("flip irqoff epoch", errno);
  }
  epoch_ = next;
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  __u32 slot = old & 1;
  absl::StatusOr<std::vector<uint64_t>> per_cpu =
      ReadPerCpu<uint64_t>(max_fd_, slot, "read irqoff_max");
  if (!per_cpu.ok()) return per_cpu.status();
  uint64_t max = *std::max_element(per_cpu->begin(), per_cpu->end());
  std::fill(per_cpu->begin(), per_cpu->end(), 0);
  if (bpf_map_update_elem(max_fd_, &slot, per_cpu->data(), BPF_ANY) != 0) {
    return LibbpfError("clear irqoff_max", errno);
  }
  seconds = static_cast<double>(max) / 1e9;
  return absl::OkStatus();
}

absl::Status IrqOffProbe::Collect(MetricFamilies& out) {
  if (!obj_) return absl::FailedPreconditionError("probe not attached");
  RefreshCpus();

  // Events first, totals second: every drained region is then already in the totals.
  drained_events_.clear();
  if (absl::Status s = DrainEvents(); !s.ok()) return s;
  double interval_max = 0;
  if (absl::Status s = ReadIntervalMax(interval_max); !s.ok()) return s;
  longest_.Add(absl::Now(), interval_max);
  absl::StatusOr<std::vector<irqoff_totals>> per_cpu =
      ReadPerCpu<irqoff_totals>(totals_fd_, 0, "read irqoff_totals");
  if (!per_cpu.ok()) return per_cpu.status();
  irqoff_totals sum{};
  for (const irqoff_totals& c : *per_cpu) {
    sum.ticks += c.ticks;
    sum.nmis += c.nmis;
    sum.regions += c.regions;
    sum.region_ns += c.region_ns;
    for (size_t b = 0; b <= IRQOFF_BUCKETS; ++b) sum.buckets[b] += c.buckets[b];
    sum.late_idle += c.late_idle;
    sum.late_steal += c.late_steal;
    sum.late_user += c.late_user;
    sum.late_host_preempted += c.late_host_preempted;
    sum.late_preemptible += c.late_preemptible;
    sum.unwitnessed += c.unwitnessed;
    sum.late_vm_pause += c.late_vm_pause;
    sum.events_lost += c.events_lost;
  }

  CountRegions(sum.events_lost);

  FamilyBuilder histogram(irqoff_metrics::kSeconds);
  AddRegionHistogram({}, sum, histogram);
  histogram.AppendTo(out);
  FamilyBuilder(irqoff_metrics::kMaxSeconds).Add(longest_.Max()).AppendTo(out);
  regions_.AppendFamilies(irqoff_metrics::kRegionsTotal, irqoff_metrics::kRegionsEvictedTotal, 0,
                          out);
  // Which CPU stalls. The online CPUs are read again here: the preemptirq method keeps no timers.
  absl::StatusOr<std::vector<int>> online = kernel_.OnlineCpus();
  AppendPerCpuFamilies(*per_cpu, online.ok() ? *online : std::vector<int>{}, out);
  FamilyBuilder(irqoff_metrics::kIgnoredLateTicksTotal)
      .Add({{"reason", "idle"}}, static_cast<double>(sum.late_idle))
      .Add({{"reason", "steal"}}, static_cast<double>(sum.late_steal))
      .Add({{"reason", "host_preempted"}}, static_cast<double>(sum.late_host_preempted))
      .Add({{"reason", "preemptible"}}, static_cast<double>(sum.late_preemptible))
      .Add({{"reason", "vm_pause"}}, static_cast<double>(sum.late_vm_pause))
      .AppendTo(out);
  if (method_ != IrqOffMethod::kPreemptIrq) {
    FamilyBuilder(irqoff_metrics::kTimerTicksTotal)
        .Add(static_cast<double>(sum.ticks))
        .AppendTo(out);
  }
  if (method_ == IrqOffMethod::kNmi) {
    FamilyBuilder(irqoff_metrics::kNmiSamplesTotal)
        .Add(static_cast<double>(sum.nmis))
        .AppendTo(out);
  }
  FamilyBuilder(irqoff_metrics::kThresholdSeconds)
      .Add(absl::ToDoubleSeconds(options_.detector.threshold))
      .AppendTo(out);
  FamilyBuilder(irqoff_metrics::kResolutionSeconds)
      .Add({{"method", std::string(IrqOffMethodName(method_))}},
           method_ == IrqOffMethod::kPreemptIrq
               ? 0
               : absl::ToDoubleSeconds(options_.detector.period) / 2)
      .AppendTo(out);
  FamilyBuilder(irqoff_metrics::kDetectorInfo)
      .Add({{"method", std::string(IrqOffMethodName(method_))},
            {"steal_correction", steal_correction_ ? "kvm" : "none"},
            {"witness", std::string(WitnessName())},
            {"idle_detection", idle_hook_ ? "cpu_idle" : "idle_task"},
            {"switch_tracking", std::string(SwitchHookName())},
            {"vm_pauses", std::string(VmPausesName())}},
           1)
      .AppendTo(out);
  FamilyBuilder(health_metrics::kEventsLostTotal)
      .Add({{"probe", std::string(kName)}, {"reason", "buffer_full"}},
           static_cast<double>(sum.events_lost))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
