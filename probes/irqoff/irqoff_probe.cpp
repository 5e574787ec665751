#include "probes/irqoff/irqoff_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "irqoff.skel.h"
#include "irqoff_kvm_steal.skel.h"
#include "probes/collect/health_metrics.h"
#include "probes/irqoff/culprit.h"
#include "probes/irqoff/irqoff.h"
#include "probes/irqoff/irqoff_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

constexpr std::string_view kPreemptIrqTarget = "preemptirq:irq_disable/irq_enable";
constexpr uint64_t kBucketBoundsUs[IRQOFF_BUCKETS] = IRQOFF_BUCKET_BOUNDS_US;
// Pages per CPU of the perf buffer (kernels without a BPF ring buffer).
constexpr size_t kPerfBufferPages = 8;
// NMI samples per threshold: a region of threshold length is seen at least twice.
constexpr double kNmiSamplesPerThreshold = 4;

std::string FormatMs(absl::Duration d) {
  return fmt::format("{:g}ms", absl::ToDoubleMilliseconds(d));
}

int PerfEventOpen(perf_event_attr& attr, int cpu) {
  return static_cast<int>(
      syscall(SYS_perf_event_open, &attr, /*pid=*/-1, cpu, /*group_fd=*/-1, PERF_FLAG_FD_CLOEXEC));
}

int HandleRingEvent(void* ctx, void* data, size_t size) {
  if (size >= sizeof(irqoff_event)) {
    static_cast<std::vector<irqoff_event>*>(ctx)->push_back(
        *static_cast<const irqoff_event*>(data));
  }
  return 0;
}

void HandlePerfEvent(void* ctx, int /*cpu*/, void* data, __u32 size) {
  HandleRingEvent(ctx, data, size);
}

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

IrqOffRegion RegionFromEvent(const irqoff_event& event, KernelStackSymbolizer& symbolizer) {
  IrqOffRegion region;
  region.seconds = static_cast<double>(event.length_ns) / 1e9;
  region.cpu = static_cast<int>(event.cpu);
  region.pid = event.pid;
  region.comm = std::string(event.comm, strnlen(event.comm, sizeof(event.comm)));
  if (region.comm.empty()) region.comm = "unknown";
  region.task_switched = (event.flags & IRQOFF_EVENT_TASK_SWITCHED) != 0;
  region.user_mode = (event.flags & IRQOFF_EVENT_USER_MODE) != 0;

  std::vector<uint64_t> addresses;
  // preemptirq: the code that disabled IRQs comes first; it is the culprit by construction.
  for (uint64_t site : event.disable_site) {
    if (site != 0) addresses.push_back(site);
  }
  size_t disable_frames = addresses.size();
  int frames = event.stack_size > 0 ? event.stack_size / static_cast<int>(sizeof(uint64_t)) : 0;
  frames = std::min(frames, IRQOFF_STACK_DEPTH);
  for (int i = 0; i < frames; ++i) addresses.push_back(event.stack[i]);
  std::vector<std::optional<std::string>> names = symbolizer.Symbolize(addresses);
  for (size_t i = 0; i < names.size(); ++i) {
    region.frames.push_back(names[i] ? *names[i] : fmt::format("{:#x}", addresses[i]));
  }
  // When the late interrupt landed in another thread than the holder, its stack is that other
  // thread's and names nothing the holder did.
  if (region.task_switched && disable_frames == 0) {
    region.culprit = std::string(kUnknownCulprit);
  } else {
    region.culprit = IrqOffCulprit(names);
  }
  return region;
}

std::string DescribeRegion(const IrqOffRegion& region) {
  std::string where = region.user_mode       ? "; the late interrupt landed in user code"
                      : region.task_switched ? "; the late interrupt landed in the next thread"
                                             : "";
  std::string stack =
      region.frames.empty()
          ? ""
          : fmt::format("; stack: {}",
                        fmt::join(region.frames.begin(),
                                  region.frames.begin() +
                                      static_cast<long>(std::min<size_t>(region.frames.size(), 8)),
                                  " <- "));
  return fmt::format("{:.1f} ms on CPU {} in {} (pid {}), culprit {}{}{}", region.seconds * 1e3,
                     region.cpu, region.comm, region.pid, region.culprit, where, stack);
}

IrqOffProbe::IrqOffProbe(KernelFeatures& kernel, std::unique_ptr<IrqOffKernel> irq_kernel,
                         HostPaths paths, std::vector<Mechanism> allowed, IrqOffOptions options)
    : kernel_(kernel),
      irq_kernel_owned_(std::move(irq_kernel)),
      irq_kernel_(*irq_kernel_owned_),
      paths_(std::move(paths)),
      allowed_(std::move(allowed)),
      options_(options),
      regions_(
          {"comm", "culprit"},
          {static_cast<size_t>(options.labels.comm), static_cast<size_t>(options.labels.caller)},
          1) {}

IrqOffProbe::~IrqOffProbe() { Detach(); }

std::string IrqOffProbe::SoftwareTarget() const {
  return fmt::format("cpu-clock every {}", FormatMs(options_.detector.period));
}

std::string IrqOffProbe::NmiTarget() const {
  return fmt::format("cycles NMI + cpu-clock every {}", FormatMs(options_.detector.period));
}

std::vector<AttachPlan> IrqOffProbe::Plans() const {
  return {
      {Mechanism::kTpBtf, std::string(kPreemptIrqTarget)},
      {Mechanism::kRawTp, std::string(kPreemptIrqTarget)},
      {Mechanism::kTracepoint, std::string(kPreemptIrqTarget)},
      {Mechanism::kPerfEvent, NmiTarget()},
      {Mechanism::kPerfEvent, SoftwareTarget()},
  };
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

absl::Status IrqOffProbe::Supported(const AttachPlan& plan, KernelFeatures& kernel) {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      if (!kernel.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel.BtfTracepointArgs("irq_disable") || !kernel.BtfTracepointArgs("irq_enable")) {
        return absl::NotFoundError(
            "tracepoints not in BTF (kernel without CONFIG_PREEMPTIRQ_TRACEPOINTS)");
      }
      return absl::OkStatus();
    case Mechanism::kRawTp:
      if (!kernel.TracepointExists("preemptirq", "irq_disable") ||
          !kernel.TracepointExists("preemptirq", "irq_enable")) {
        return absl::NotFoundError(
            "kernel has no such tracepoints (CONFIG_PREEMPTIRQ_TRACEPOINTS is off)");
      }
      return absl::OkStatus();
    case Mechanism::kTracepoint:
      for (std::string_view event : {"irq_disable", "irq_enable"}) {
        absl::StatusOr<TracepointFormat> format = kernel.Tracepoint("preemptirq", event);
        if (!format.ok()) return format.status();
        if (!format->Find("caller_offs") || !format->Find("parent_offs")) {
          return absl::NotFoundError("format has no caller_offs/parent_offs");
        }
      }
      return absl::OkStatus();
    case Mechanism::kPerfEvent: {
      if (absl::Status s = irq_kernel_.SoftwareCpuClock(); !s.ok()) return s;
      if (MethodOf(plan) == IrqOffMethod::kNmi) return irq_kernel_.HardwareNmiSampling();
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

template <typename Skeleton>
absl::Status IrqOffProbe::Load(Skeleton* skel, IrqOffMethod method, Mechanism mechanism,
                               bool with_helpers, KernelFeatures& kernel) {
  skel->rodata->period_ns = static_cast<__u64>(absl::ToInt64Nanoseconds(options_.detector.period));
  skel->rodata->threshold_ns =
      static_cast<__u64>(absl::ToInt64Nanoseconds(options_.detector.threshold));
  const bool ring = irq_kernel_.HasRingBuffer();
  skel->rodata->use_ringbuf = ring ? 1 : 0;
  if (!ring) {
    // The map must still be created for the object to load: make it a one-slot array.
    bpf_map__set_type(skel->maps.irqoff_events, BPF_MAP_TYPE_ARRAY);
    bpf_map__set_key_size(skel->maps.irqoff_events, sizeof(__u32));
    bpf_map__set_value_size(skel->maps.irqoff_events, sizeof(__u32));
    bpf_map__set_max_entries(skel->maps.irqoff_events, 1);
  }
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return LibbpfError("libbpf_num_possible_cpus", ncpus);
  bpf_map__set_max_entries(skel->maps.irqoff_cpu_generation, static_cast<__u32>(ncpus));

  std::vector<bpf_program*> wanted;
  if (method == IrqOffMethod::kPreemptIrq) {
    switch (mechanism) {
      case Mechanism::kTpBtf:
        wanted = {skel->progs.irqoff_disable_tp_btf, skel->progs.irqoff_enable_tp_btf};
        break;
      case Mechanism::kRawTp:
        wanted = {skel->progs.irqoff_disable_raw_tp, skel->progs.irqoff_enable_raw_tp};
        break;
      default: {
        absl::StatusOr<TracepointFormat> format = kernel.Tracepoint("preemptirq", "irq_disable");
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
        wanted = {skel->progs.irqoff_disable_tracepoint, skel->progs.irqoff_enable_tracepoint};
      }
    }
  } else {
    wanted = {skel->progs.irqoff_tick};
    if (method == IrqOffMethod::kNmi) wanted.push_back(skel->progs.irqoff_nmi);
  }

  idle_hook_ = false;
  switch_hook_ = SwitchHook::kNone;
  if (with_helpers) {
    if (kernel.TracepointExists("power", "cpu_idle")) {
      wanted.push_back(skel->progs.irqoff_cpu_idle_raw_tp);
      idle_hook_ = true;
    }
    if (method != IrqOffMethod::kPreemptIrq) {
      std::optional<int> args =
          kernel.HasVmlinuxBtf() ? kernel.BtfTracepointArgs("sched_switch") : std::nullopt;
      std::optional<TaskStructOffsets> task = args ? irq_kernel_.TaskOffsets() : std::nullopt;
      if (args && *args >= 3 && task) {
        skel->rodata->task_pid_offset = task->pid;
        skel->rodata->task_comm_offset = task->comm;
        wanted.push_back(skel->progs.irqoff_sched_switch_tp_btf);
        switch_hook_ = SwitchHook::kTpBtf;
      } else if (absl::StatusOr<TracepointFormat> format =
                     kernel.Tracepoint("sched", "sched_switch");
                 format.ok() && format->Find("prev_comm") && format->Find("prev_pid")) {
        skel->rodata->tp_prev_comm_offset = format->Find("prev_comm")->offset;
        skel->rodata->tp_prev_pid_offset = format->Find("prev_pid")->offset;
        wanted.push_back(skel->progs.irqoff_sched_switch_tracepoint);
        switch_hook_ = SwitchHook::kTracepoint;
      }
    }
  }
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel->obj) {
    bpf_program__set_autoload(prog, std::find(wanted.begin(), wanted.end(), prog) != wanted.end());
  }
  int err = bpf_object__load(skel->obj);
  if (err) return LibbpfError("load", err);
  return absl::OkStatus();
}

absl::Status IrqOffProbe::LoadAny(IrqOffMethod method, Mechanism mechanism,
                                  KernelFeatures& kernel) {
  std::vector<std::string> failures;
  // Steal correction only matters to the timer methods; its object loads only where the kernel
  // resolves KVM's steal_time (else the plain object is used).
  const bool try_steal = method != IrqOffMethod::kPreemptIrq && irq_kernel_.KvmStealTimeReadable();
  for (bool steal : {true, false}) {
    if (steal && !try_steal) continue;
    // Helpers (idle and context-switch hooks) first; without them if they keep it from loading.
    for (bool helpers : {true, false}) {
      absl::Status loaded;
      if (steal) {
        OwnedSkeleton<irqoff_kvm_steal_bpf> skel(irqoff_kvm_steal_bpf__open(),
                                                 irqoff_kvm_steal_bpf__destroy);
        if (!skel) return LibbpfError("open", errno);
        loaded = Load(skel.get(), method, mechanism, helpers, kernel);
        if (loaded.ok()) {
          obj_ = skel->obj;
          steal_ = std::move(skel);
        }
      } else {
        OwnedSkeleton<irqoff_bpf> skel(irqoff_bpf__open(), irqoff_bpf__destroy);
        if (!skel) return LibbpfError("open", errno);
        loaded = Load(skel.get(), method, mechanism, helpers, kernel);
        if (loaded.ok()) {
          obj_ = skel->obj;
          plain_ = std::move(skel);
        }
      }
      if (loaded.ok()) {
        steal_correction_ = steal;
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

absl::Status IrqOffProbe::AttachProgram(const char* name) {
  bpf_program* prog = bpf_object__find_program_by_name(obj_, name);
  if (!prog) return absl::NotFoundError(fmt::format("no program {}", name));
  bpf_link* link = bpf_program__attach(prog);
  if (!link) return LibbpfError(fmt::format("attach {}", name), errno);
  links_.emplace_back(link);
  return absl::OkStatus();
}

absl::Status IrqOffProbe::Attach(const AttachPlan& plan, KernelFeatures& kernel) {
  Detach();
  IrqOffMethod method = MethodOf(plan);
  if (method == IrqOffMethod::kNone) return absl::UnimplementedError("mechanism not offered");
  if (absl::Status s = LoadAny(method, plan.mechanism, kernel); !s.ok()) {
    Detach();
    return s;
  }
  auto fail = [&](absl::Status s) {
    Detach();
    return s;
  };
  auto map_fd = [&](const char* name) {
    bpf_map* map = bpf_object__find_map_by_name(obj_, name);
    return map ? bpf_map__fd(map) : -1;
  };
  totals_fd_ = map_fd("irqoff_totals");
  max_fd_ = map_fd("irqoff_max");
  epoch_fd_ = map_fd("irqoff_epoch");
  generation_fd_ = map_fd("irqoff_cpu_generation");
  if (totals_fd_ < 0 || max_fd_ < 0 || epoch_fd_ < 0 || generation_fd_ < 0) {
    return fail(absl::InternalError("irqoff maps missing from the object"));
  }

  if (method == IrqOffMethod::kPreemptIrq) {
    const char* disable = plan.mechanism == Mechanism::kTpBtf   ? "irqoff_disable_tp_btf"
                          : plan.mechanism == Mechanism::kRawTp ? "irqoff_disable_raw_tp"
                                                                : "irqoff_disable_tracepoint";
    const char* enable = plan.mechanism == Mechanism::kTpBtf   ? "irqoff_enable_tp_btf"
                         : plan.mechanism == Mechanism::kRawTp ? "irqoff_enable_raw_tp"
                                                               : "irqoff_enable_tracepoint";
    if (absl::Status s = AttachProgram(disable); !s.ok()) return fail(s);
    if (absl::Status s = AttachProgram(enable); !s.ok()) return fail(s);
  }
  // Helpers: without them the timer methods still work, with more idle or attribution errors.
  if (idle_hook_) {
    if (absl::Status s = AttachProgram("irqoff_cpu_idle_raw_tp"); !s.ok()) {
      spdlog::warn(
          "probe irqoff: idle hook power:cpu_idle not attached ({}); idle CPUs are told "
          "apart by the idle task only",
          std::string(s.message()));
      idle_hook_ = false;
    }
  }
  if (switch_hook_ != SwitchHook::kNone) {
    const char* name = switch_hook_ == SwitchHook::kTpBtf ? "irqoff_sched_switch_tp_btf"
                                                          : "irqoff_sched_switch_tracepoint";
    if (absl::Status s = AttachProgram(name); !s.ok()) {
      spdlog::warn(
          "probe irqoff: sched:sched_switch hook not attached ({}); regions are "
          "attributed to the thread the late tick interrupted",
          std::string(s.message()));
      switch_hook_ = SwitchHook::kNone;
    }
  }
  method_ = method;

  if (method != IrqOffMethod::kPreemptIrq) {
    absl::StatusOr<std::vector<int>> online = irq_kernel_.OnlineCpus();
    if (!online.ok()) return fail(online.status());
    std::vector<std::string> errors;
    for (int cpu : *online) {
      if (absl::Status s = AttachCpu(cpu); !s.ok()) {
        errors.push_back(fmt::format("CPU {}: {}", cpu, std::string(s.message())));
      }
    }
    if (cpus_.empty()) {
      return fail(absl::UnavailableError(errors.empty()
                                             ? std::string("no online CPU")
                                             : fmt::format("{}", fmt::join(errors, "; "))));
    }
    if (!errors.empty()) {
      spdlog::warn("probe irqoff: timers not attached on {}", fmt::join(errors, "; "));
    }
  }

  if (irq_kernel_.HasRingBuffer()) {
    ring_ = ring_buffer__new(map_fd("irqoff_events"), HandleRingEvent, &drained_events_, nullptr);
    if (!ring_) return fail(LibbpfError("ring_buffer__new", errno));
  } else {
    perf_ = perf_buffer__new(map_fd("irqoff_events_perf"), kPerfBufferPages, HandlePerfEvent,
                             nullptr, &drained_events_, nullptr);
    if (!perf_) return fail(LibbpfError("perf_buffer__new", errno));
  }
  if (!symbolizer_) {
    symbolizer_ = std::make_unique<KernelStackSymbolizer>(paths_, kernel.Kallsyms());
  }
  return absl::OkStatus();
}

absl::Status IrqOffProbe::AttachCpu(int cpu) {
  if (cpus_.count(cpu)) return absl::OkStatus();
  // A new generation first: the first tick on this CPU then starts a fresh baseline.
  uint32_t generation = ++generations_[cpu];
  __u32 key = static_cast<__u32>(cpu);
  if (bpf_map_update_elem(generation_fd_, &key, &generation, BPF_ANY) != 0) {
    return LibbpfError("set CPU generation", errno);
  }
  CpuTimers timers;
  perf_event_attr tick{};
  tick.size = sizeof(tick);
  tick.type = PERF_TYPE_SOFTWARE;
  tick.config = PERF_COUNT_SW_CPU_CLOCK;
  tick.sample_period = static_cast<__u64>(absl::ToInt64Nanoseconds(options_.detector.period));
  timers.tick.fd = PerfEventOpen(tick, cpu);
  if (timers.tick.fd < 0) return LibbpfError("perf_event_open cpu-clock", errno);
  bpf_program* tick_prog = bpf_object__find_program_by_name(obj_, "irqoff_tick");
  bpf_link* link = tick_prog ? bpf_program__attach_perf_event(tick_prog, timers.tick.fd) : nullptr;
  if (!link) {
    int err = errno;
    close(timers.tick.fd);
    return LibbpfError("attach cpu-clock", err);
  }
  timers.tick.link.reset(link);

  if (method_ == IrqOffMethod::kNmi) {
    perf_event_attr nmi{};
    nmi.size = sizeof(nmi);
    nmi.type = PERF_TYPE_HARDWARE;
    nmi.config = PERF_COUNT_HW_CPU_CYCLES;
    nmi.freq = 1;
    nmi.sample_freq = static_cast<__u64>(
        std::ceil(kNmiSamplesPerThreshold / absl::ToDoubleSeconds(options_.detector.threshold)));
    timers.nmi.fd = PerfEventOpen(nmi, cpu);
    bpf_program* nmi_prog = bpf_object__find_program_by_name(obj_, "irqoff_nmi");
    bpf_link* nmi_link = timers.nmi.fd >= 0 && nmi_prog
                             ? bpf_program__attach_perf_event(nmi_prog, timers.nmi.fd)
                             : nullptr;
    if (!nmi_link) {
      int err = errno;
      if (timers.nmi.fd >= 0) close(timers.nmi.fd);
      timers.tick.link.reset();  // closes the tick's perf event too
      return LibbpfError("cycles NMI event", err);
    }
    timers.nmi.link.reset(nmi_link);
  }
  cpus_.emplace(cpu, std::move(timers));
  return absl::OkStatus();
}

void IrqOffProbe::DetachCpu(int cpu) {
  auto it = cpus_.find(cpu);
  if (it == cpus_.end()) return;
  for (PerfAttachment* a : {&it->second.tick, &it->second.nmi}) {
    // libbpf's perf-event link owns the event's fd: destroying the link closes it.
    if (a->link) {
      a->link.reset();
    } else if (a->fd >= 0) {
      close(a->fd);
    }
    a->fd = -1;
  }
  cpus_.erase(it);
}

void IrqOffProbe::RefreshCpus() {
  if (method_ != IrqOffMethod::kNmi && method_ != IrqOffMethod::kSoftwareTimer) return;
  absl::StatusOr<std::vector<int>> online = irq_kernel_.OnlineCpus();
  if (!online.ok()) return;  // keep what is attached
  std::vector<int> gone;
  for (const auto& [cpu, timers] : cpus_) {
    if (!std::binary_search(online->begin(), online->end(), cpu)) gone.push_back(cpu);
  }
  for (int cpu : gone) {
    DetachCpu(cpu);
    spdlog::info("probe irqoff: CPU {} went offline, its timer is closed", cpu);
  }
  for (int cpu : *online) {
    if (cpus_.count(cpu)) continue;
    absl::Status s = AttachCpu(cpu);
    std::string error = s.ok() ? "" : std::string(s.message());
    if (s.ok()) {
      spdlog::info("probe irqoff: CPU {} is online, its timer is attached", cpu);
    } else if (cpu_errors_[cpu] != error) {
      spdlog::warn("probe irqoff: CPU {} is online but its timer did not attach: {}", cpu, error);
    }
    cpu_errors_[cpu] = error;
  }
}

void IrqOffProbe::Detach() {
  if (ring_) ring_buffer__free(ring_);
  ring_ = nullptr;
  if (perf_) perf_buffer__free(perf_);
  perf_ = nullptr;
  std::vector<int> cpus;
  for (const auto& [cpu, timers] : cpus_) cpus.push_back(cpu);
  for (int cpu : cpus) DetachCpu(cpu);
  links_.clear();
  plain_.reset();
  steal_.reset();
  obj_ = nullptr;
  totals_fd_ = max_fd_ = epoch_fd_ = generation_fd_ = -1;
  method_ = IrqOffMethod::kNone;
}

absl::Status IrqOffProbe::Start() {
  if (options_.detector.threshold < 2 * options_.detector.period) {
    state_ =
        ProbeState{std::string(kName), Mechanism::kNone, "threshold must be at least 2 x period"};
    return absl::InvalidArgumentError(state_.detail);
  }
  if (absl::Status s = StartProbe(*this, kernel_, allowed_, state_); !s.ok()) return s;
  std::string resolution =
      method_ == IrqOffMethod::kPreemptIrq
          ? "exact lengths"
          : fmt::format("resolution +-{}: regions shorter than that may be missed",
                        FormatMs(options_.detector.period / 2));
  spdlog::info(
      "probe irqoff: measuring with {} ({}), reporting regions of {} or more; steal-time "
      "correction {}, idle hook {}, context-switch hook {}",
      IrqOffMethodName(method_), resolution, FormatMs(options_.detector.threshold),
      steal_correction_ ? "kvm" : "none", idle_hook_ ? "power:cpu_idle" : "none",
      switch_hook_ == SwitchHook::kTpBtf        ? "tp_btf"
      : switch_hook_ == SwitchHook::kTracepoint ? "tracepoint"
                                                : "none");
  return absl::OkStatus();
}

std::vector<OwnBpfProgram> IrqOffProbe::Programs() const {
  std::vector<OwnBpfProgram> programs;
  if (!obj_) return programs;
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, obj_) {
    if (!bpf_program__autoload(prog)) continue;
    int fd = bpf_program__fd(prog);
    if (fd >= 0) programs.push_back({std::string(kName), bpf_program__name(prog), fd});
  }
  return programs;
}

void IrqOffProbe::SetLabelLimits(const LabelLimits& labels) {
  options_.labels = labels;
  regions_.SetTopN({static_cast<size_t>(labels.comm), static_cast<size_t>(labels.caller)});
}

absl::Status IrqOffProbe::DrainEvents() {
  int n = ring_ ? ring_buffer__consume(ring_) : perf_ ? perf_buffer__consume(perf_) : 0;
  if (n < 0) return LibbpfError("drain irqoff events", n);
  return absl::OkStatus();
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
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return LibbpfError("libbpf_num_possible_cpus", ncpus);
  std::vector<__u64> per_cpu(static_cast<size_t>(ncpus));
  __u32 slot = old & 1;
  if (bpf_map_lookup_elem(max_fd_, &slot, per_cpu.data()) != 0) {
    return LibbpfError("read irqoff_max", errno);
  }
  __u64 max = 0;
  for (__u64 v : per_cpu) max = std::max(max, v);
  std::fill(per_cpu.begin(), per_cpu.end(), 0);
  if (bpf_map_update_elem(max_fd_, &slot, per_cpu.data(), BPF_ANY) != 0) {
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
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return LibbpfError("libbpf_num_possible_cpus", ncpus);
  std::vector<irqoff_totals> per_cpu(static_cast<size_t>(ncpus));
  __u32 zero = 0;
  if (bpf_map_lookup_elem(totals_fd_, &zero, per_cpu.data()) != 0) {
    return LibbpfError("read irqoff_totals", errno);
  }
  irqoff_totals sum{};
  for (const irqoff_totals& c : per_cpu) {
    sum.ticks += c.ticks;
    sum.nmis += c.nmis;
    sum.regions += c.regions;
    sum.region_ns += c.region_ns;
    for (size_t b = 0; b <= IRQOFF_BUCKETS; ++b) sum.buckets[b] += c.buckets[b];
    sum.late_idle += c.late_idle;
    sum.late_steal += c.late_steal;
    sum.late_user += c.late_user;
    sum.events_lost += c.events_lost;
  }

  std::vector<IrqOffRegion> regions;
  regions.reserve(drained_events_.size());
  for (const irqoff_event& event : drained_events_) {
    regions.push_back(RegionFromEvent(event, *symbolizer_));
  }
  drained_events_.clear();
  const uint64_t one = 1;
  constexpr size_t kDebugLogged = 20;  // per interval, so that a storm cannot flood the log
  for (size_t i = 0; i < regions.size(); ++i) {
    const IrqOffRegion& region = regions[i];
    regions_.Add({region.comm, region.culprit}, std::span<const uint64_t>(&one, 1));
    if (i < kDebugLogged) spdlog::debug("irqoff: region {}", DescribeRegion(region));
  }
  // Regions whose event was lost are counted all the same, without labels.
  if (sum.events_lost > events_lost_seen_) {
    const uint64_t lost = sum.events_lost - events_lost_seen_;
    regions_.AddOther(std::span<const uint64_t>(&lost, 1));
    events_lost_seen_ = sum.events_lost;
  }
  regions_.EndInterval();

  // The longest region of this interval, for the log and the STATUS line.
  const IrqOffRegion* longest = nullptr;
  for (const IrqOffRegion& region : regions) {
    if (!longest || region.seconds > longest->seconds) longest = &region;
  }
  if (longest) {
    spdlog::info("irqoff: {} region{} of {} or more since the last sample; longest {}",
                 regions.size(), regions.size() == 1 ? "" : "s",
                 FormatMs(options_.detector.threshold), DescribeRegion(*longest));
    status_ = fmt::format("IRQs off {:.1f} ms max ({}, {})", longest->seconds * 1e3,
                          longest->culprit, longest->comm);
  } else {
    status_.clear();
  }

  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  for (size_t b = 0; b < IRQOFF_BUCKETS; ++b) {
    bounds.push_back(static_cast<double>(kBucketBoundsUs[b]) / 1e6);
    counts.push_back(sum.buckets[b]);
  }
  counts.push_back(sum.buckets[IRQOFF_BUCKETS]);
  FamilyBuilder(irqoff_metrics::kSeconds)
      .AddHistogram({}, bounds, counts, static_cast<double>(sum.region_ns) / 1e9)
      .AppendTo(out);
  FamilyBuilder(irqoff_metrics::kMaxSeconds).Add(interval_max).AppendTo(out);
  FamilyBuilder by_culprit(irqoff_metrics::kRegionsTotal);
  regions_.AppendTo(by_culprit, 0);
  by_culprit.AppendTo(out);
  FamilyBuilder(irqoff_metrics::kIgnoredLateTicksTotal)
      .Add({{"reason", "idle"}}, static_cast<double>(sum.late_idle))
      .Add({{"reason", "steal"}}, static_cast<double>(sum.late_steal))
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
            {"idle_detection", idle_hook_ ? "cpu_idle" : "idle_task"},
            {"switch_tracking", switch_hook_ == SwitchHook::kTpBtf        ? "tp_btf"
                                : switch_hook_ == SwitchHook::kTracepoint ? "tracepoint"
                                                                          : "none"}},
           1)
      .AppendTo(out);
  FamilyBuilder(health_metrics::kEventsLostTotal)
      .Add({{"probe", std::string(kName)}, {"reason", "buffer_full"}},
           static_cast<double>(sum.events_lost))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
