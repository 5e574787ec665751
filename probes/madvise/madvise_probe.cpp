#include "probes/madvise/madvise_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "madvise.legacy.skel.h"
#include "madvise.skel.h"
#include "madvise_fentry.skel.h"
#include "probes/collect/bpf_maps.h"
#include "probes/collect/bpf_skeleton.h"
#include "probes/collect/health_metrics.h"
#include "probes/madvise/madvise.h"
#include "probes/madvise/madvise_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

constexpr std::string_view kCategory = "syscalls";
constexpr std::string_view kEvent = "sys_enter_madvise";
constexpr std::string_view kProcessEvent = "sys_enter_process_madvise";

// The syscall entry wrappers, one per architecture (ARCH_HAS_SYSCALL_WRAPPER: x86_64 since 4.17,
// arm64 since 4.19), then the forms without a wrapper, then the implementation behind them.
constexpr std::string_view kSyscallWrappers[] = {"__x64_sys_madvise", "__arm64_sys_madvise"};
constexpr std::string_view kPlainSyscalls[] = {"__se_sys_madvise", "sys_madvise"};

constexpr std::array<std::string_view, MADVISE_ADVICE_COUNT> kAdviceNames = {
    "dontneed", "free",       "willneed", "cold", "pageout",
    "hugepage", "nohugepage", "collapse", "other"};

std::string TracepointName(std::string_view event) {
  return fmt::format("{}:{}", kCategory, event);
}

bool IsWrapper(std::string_view target) {
  return std::find(std::begin(kSyscallWrappers), std::end(kSyscallWrappers), target) !=
         std::end(kSyscallWrappers);
}

// "__x64_sys_madvise" -> "__x64_sys_process_madvise"; "sys_madvise" -> "sys_process_madvise".
std::string ProcessMadviseFor(std::string_view madvise_function) {
  std::string name(madvise_function);
  size_t at = name.rfind("madvise");
  return name.substr(0, at) + "process_madvise";
}

// A field of the classic tracepoint's record, by any of the names kernels have used.
const TracepointField* FindField(const TracepointFormat& format,
                                 std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    if (const TracepointField* f = format.Find(name); f != nullptr && f->size <= 8) return f;
  }
  return nullptr;
}

// The syscalls:sys_enter_* record puts argument n at 16 + 8n (struct syscall_trace_enter):
// madvise.bpf.c's madvise_tracepoint reads it directly when the format file agrees.
bool IsSyscallArgument(const TracepointField& field, int n) {
  return field.offset == 16u + 8u * static_cast<uint32_t>(n) && field.size == 8;
}

std::string FormatRate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.1f}M", per_second / 1e6);
  if (per_second >= 1e4) return fmt::format("{:.1f}k", per_second / 1e3);
  return fmt::format("{:.0f}", per_second);
}

}  // namespace

std::string_view MadviseAdviceName(uint32_t advice) {
  return advice < kAdviceNames.size() ? kAdviceNames[advice] : kAdviceNames.back();
}

std::string MadviseStormFragment(std::string_view comm, double calls_per_second, double threshold) {
  if (comm.empty() || calls_per_second <= 0 || calls_per_second < threshold) return {};
  return fmt::format("madvise storm: {} {} calls/s", comm, FormatRate(calls_per_second));
}

std::optional<MadviseArgLayout> DoMadviseLayout(const std::vector<std::string>& params) {
  if (params.size() == 1) return MadviseArgLayout::kSyscallRegs;
  if (params.size() == 3) return MadviseArgLayout::kPlainArgs;
  if (params.size() == 4 && params[0] == "mm") return MadviseArgLayout::kMmFirst;
  return std::nullopt;
}

MadviseProbe::MadviseProbe(KernelFeatures& kernel, MadviseProbeOptions options, Clock clock)
    : BpfProbe(kName, kernel, options.allowed),
      options_(std::move(options)),
      clock_(clock ? std::move(clock) : Clock(std::chrono::steady_clock::now)),
      pod_labels_(options_.pods),
      folded_(pod_labels_.Names({"comm", "advice"}), TopN(options_.labels), /*fields=*/2),
      events_(MADVISE_EVENT_MAX, 0),
      storm_threshold_(options_.storm_calls_per_second) {}

MadviseProbe::~MadviseProbe() { Detach(); }

std::vector<size_t> MadviseProbe::TopN(const LabelLimits& limits) const {
  return pod_labels_.TopN({static_cast<size_t>(std::max(limits.comm, 1)), kAdviceNames.size()},
                          limits.pod);
}

std::vector<std::string> MadviseProbe::Labels(std::string comm, std::string advice,
                                              uint64_t owner) {
  std::vector<std::string> labels{std::move(comm), std::move(advice)};
  pod_labels_.Append(labels, owner);
  return labels;
}

std::vector<AttachPlan> MadviseProbe::Plans() const {
  return PlansFor(kMechanisms, kDefaultMechanisms, [](Mechanism m) {
    if (m == Mechanism::kTracepoint) return std::vector<std::string>{TracepointName(kEvent)};
    std::vector<std::string> targets(std::begin(kSyscallWrappers), std::end(kSyscallWrappers));
    if (m == Mechanism::kKprobe) {
      targets.insert(targets.end(), std::begin(kPlainSyscalls), std::end(kPlainSyscalls));
    }
    targets.emplace_back(kImplementation);
    return targets;
  });
}

absl::StatusOr<MadviseArgLayout> MadviseProbe::FunctionLayout(const std::string& target) {
  // BTF knows the prototype: trust it over the name.
  if (std::optional<std::vector<std::string>> params = kernel_.BtfFunctionParams(target)) {
    if (std::optional<MadviseArgLayout> layout = DoMadviseLayout(*params)) return *layout;
    return absl::UnimplementedError(
        fmt::format("unknown prototype {}({}) in BTF", target, fmt::join(*params, ", ")));
  }
  if (IsWrapper(target)) return MadviseArgLayout::kSyscallRegs;
  if (std::find(std::begin(kPlainSyscalls), std::end(kPlainSyscalls), target) !=
      std::end(kPlainSyscalls)) {
    return MadviseArgLayout::kPlainArgs;
  }
  return absl::UnavailableError(fmt::format(
      "argument positions of {} unknown without BTF (it gained a leading mm in 5.10)", target));
}

absl::Status MadviseProbe::Supported(const AttachPlan& plan) {
  switch (plan.mechanism) {
    case Mechanism::kFentry: {
      if (!kernel_.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel_.BtfHasFunction(plan.target)) return absl::NotFoundError("function not in BTF");
      return FunctionLayout(plan.target).status();
    }
    case Mechanism::kKprobe: {
      if (absl::Status s = kernel_.KprobesAvailable(); !s.ok()) return s;
      if (!kernel_.KernelFunction(plan.target)) {
        return absl::NotFoundError("function not in kallsyms");
      }
      return FunctionLayout(plan.target).status();
    }
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      if (!FindField(*format, {"len_in", "len"}) || !FindField(*format, {"behavior"})) {
        return absl::NotFoundError("format has no len_in/behavior fields");
      }
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

MadviseProbe::Companion MadviseProbe::CompanionFor(const AttachPlan& plan) {
  if (plan.mechanism == Mechanism::kTracepoint) {
    absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, kProcessEvent);
    if (!format.ok()) {
      return {std::nullopt, fmt::format("no {} tracepoint ({})", TracepointName(kProcessEvent),
                                        std::string(format.status().message()))};
    }
    if (!FindField(*format, {"vec"}) || !FindField(*format, {"vlen"}) ||
        !FindField(*format, {"behavior"})) {
      return {std::nullopt, "process_madvise format has no vec/vlen/behavior fields"};
    }
    return {TracepointName(kProcessEvent), ""};
  }
  auto exists = [&](const std::string& fn) {
    return plan.mechanism == Mechanism::kFentry ? kernel_.BtfHasFunction(fn)
                                                : kernel_.KernelFunction(fn).has_value();
  };
  std::vector<std::string> candidates;
  if (plan.target == kImplementation) {
    // Until vector_madvise (6.13), process_madvise called do_madvise once per range: those
    // ranges are counted there already, as madvise calls.
    bool has_vector = kernel_.BtfHasFunction("vector_madvise") ||
                      kernel_.KernelFunction("vector_madvise").has_value();
    if (!has_vector) {
      return {std::nullopt,
              "no separate hook: without vector_madvise, process_madvise (where the kernel has "
              "it) calls do_madvise once per range, counted as madvise calls"};
    }
    for (std::string_view fn : kSyscallWrappers) candidates.push_back(ProcessMadviseFor(fn));
  } else if (plan.mechanism == Mechanism::kKprobe || IsWrapper(plan.target)) {
    candidates.push_back(ProcessMadviseFor(plan.target));
  }
  for (const std::string& fn : candidates) {
    if (exists(fn)) {
      if (plan.mechanism == Mechanism::kFentry &&
          FunctionLayout(fn).value_or(MadviseArgLayout::kPlainArgs) !=
              MadviseArgLayout::kSyscallRegs) {
        continue;  // the fentry program reads a pt_regs pointer
      }
      return {plan.mechanism == Mechanism::kKprobe ? kernel_.KernelFunction(fn).value_or(fn) : fn,
              ""};
    }
  }
  return {std::nullopt, candidates.empty()
                            ? "no process_madvise function to hook"
                            : fmt::format("the kernel has no {} (no process_madvise before 5.10)",
                                          fmt::join(candidates, " or "))};
}

absl::Status MadviseProbe::AdoptMaps(bpf_object* obj) {
  absl::StatusOr<KeyedCounterMaps> maps = KeyedCounterMaps::Find(obj, "madvise_counts");
  if (!maps.ok()) return maps.status();
  counts_ = *std::move(maps);
  bpf_map* b0 = bpf_object__find_map_by_name(obj, "madvise_counts_0");
  bpf_map* b1 = bpf_object__find_map_by_name(obj, "madvise_counts_1");
  bpf_map* events = bpf_object__find_map_by_name(obj, "madvise_events");
  if (!b0 || !b1 || !events) return absl::NotFoundError("madvise maps not in the object");
  buffer_fds_[0] = bpf_map__fd(b0);
  buffer_fds_[1] = bpf_map__fd(b1);
  events_fd_ = bpf_map__fd(events);
  return InsertReservedKeys();
}

absl::Status MadviseProbe::InsertReservedKeys() {
  absl::StatusOr<size_t> ncpus = PossibleCpus();
  if (!ncpus.ok()) return ncpus.status();
  std::vector<madvise_value> zeros(*ncpus);
  for (int fd : buffer_fds_) {
    for (uint32_t advice = 0; advice < MADVISE_ADVICE_COUNT; ++advice) {
      madvise_key key{};
      key.advice = advice;
      // Already there (the active buffer keeps them): nothing to do.
      if (bpf_map_update_elem(fd, &key, zeros.data(), BPF_NOEXIST) != 0 && errno != EEXIST) {
        return LibbpfError("insert reserved overflow key", errno);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status MadviseProbe::AttachTracepoint(const AttachPlan& plan) {
  absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, kEvent);
  if (!format.ok()) return format.status();
  const TracepointField* len = FindField(*format, {"len_in", "len"});
  const TracepointField* behavior = FindField(*format, {"behavior"});
  if (!len || !behavior) return absl::NotFoundError("format has no len_in/behavior fields");
  const bool direct = IsSyscallArgument(*len, 1) && IsSyscallArgument(*behavior, 2);
  // Reading the comm from the task needs the verifier to know task_struct (vmlinux BTF) and
  // bpf_get_current_task_btf (5.11+): tried first, and if the kernel refuses it, the helper.
  std::optional<uint32_t> comm_offset;
  if (direct && kernel_.HasVmlinuxBtf()) comm_offset = kernel_.Layout().Task().comm;
  Companion companion = CompanionFor(plan);
  absl::StatusOr<TracepointFormat> pm_format = kernel_.Tracepoint(kCategory, kProcessEvent);
  const bool pm_possible = companion.target.has_value() && pm_format.ok();

  absl::Status last;
  for (bool task_comm : {true, false}) {
    if (task_comm && !comm_offset) continue;
    for (bool with_companion : {true, false}) {
      if (with_companion && !pm_possible) continue;
      OwnedSkeleton<madvise_bpf> skel = KPATH_OPEN_SKELETON(madvise, kernel_.HasBpfGlobalData());
      if (!skel) return LibbpfError("open", errno);
      bpf_program* chosen = task_comm ? skel->progs.madvise_tracepoint_task_comm
                            : direct  ? skel->progs.madvise_tracepoint
                                      : skel->progs.madvise_tracepoint_offsets;
      skel->rodata->tp_len_offset = len->offset;
      skel->rodata->tp_len_size = len->size;
      skel->rodata->tp_behavior_offset = behavior->offset;
      skel->rodata->tp_behavior_size = behavior->size;
      skel->rodata->madvise_self_tgid = static_cast<__u32>(getpid());
      skel->rodata->madvise_owner = pod_labels_.OwnerKind();
      if (task_comm) skel->rodata->task_comm_offset = *comm_offset;
      bpf_program* pm = nullptr;
      if (with_companion) {
        const TracepointField* vec = FindField(*pm_format, {"vec"});
        const TracepointField* vlen = FindField(*pm_format, {"vlen"});
        const TracepointField* pm_behavior = FindField(*pm_format, {"behavior"});
        skel->rodata->tp_vec_offset = vec->offset;
        skel->rodata->tp_vec_size = vec->size;
        skel->rodata->tp_vlen_offset = vlen->offset;
        skel->rodata->tp_vlen_size = vlen->size;
        skel->rodata->tp_pm_behavior_offset = pm_behavior->offset;
        skel->rodata->tp_pm_behavior_size = pm_behavior->size;
        pm = skel->progs.process_madvise_tracepoint;
      }
      EnableOnly(skel->obj, {chosen, pm});
      if (int err = madvise_bpf__load(skel.get()); err) {
        last = LibbpfError(
            fmt::format("load {}{}", bpf_program__name(chosen), pm ? " with process_madvise" : ""),
            err);
        spdlog::debug("probe {}: {}; trying the next variant", kName, std::string(last.message()));
        continue;
      }
      if (absl::Status s = FillTunablesMap(skel->obj); !s.ok()) return s;
      if (absl::Status s = AdoptMaps(skel->obj); !s.ok()) return s;
      if (absl::Status s = AttachAndRemember({chosen}, plan, "attach"); !s.ok()) return s;
      ListPrograms({chosen});
      if (pm) {
        if (bpf_link* pm_link = AttachProgram(pm)) {
          Remember(pm_link);
          ListPrograms({pm});
          process_madvise_ = fmt::format("tracepoint {}", *companion.target);
        } else {
          process_madvise_ =
              fmt::format("not counted: attach {}: {}", *companion.target, std::strerror(errno));
        }
      } else {
        process_madvise_ = fmt::format(
            "not counted: {}", pm_possible ? std::string(last.message()) : companion.reason);
      }
      tp_skel_ = std::move(skel);
      return absl::OkStatus();
    }
  }
  return last;
}

absl::Status MadviseProbe::Attach(const AttachPlan& plan) {
  Detach();
  absl::Status s;
  switch (plan.mechanism) {
    case Mechanism::kTracepoint:
      s = AttachTracepoint(plan);
      break;
    case Mechanism::kKprobe:
    case Mechanism::kFentry:
      s = AttachFunction(plan);
      break;
    default:
      s = absl::UnimplementedError("mechanism not offered by this probe");
  }
  if (s.ok()) s = CheckHookSeesCalls(plan);
  if (!s.ok()) {
    Detach();  // nothing of a failed attempt stays loaded
    return s;
  }
  attached_plan_ = plan;
  last_drain_ = clock_();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> MadviseProbe::EventCount(uint32_t event) const {
  return SumPerCpu(events_fd_, event, "read madvise_events map");
}

absl::Status MadviseProbe::CheckHookSeesCalls(const AttachPlan& plan) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (MADVISE_SELF_CHECK_BYTES + page - 1) / page * page;
  void* area = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) return LibbpfError("mmap for the madvise check call", errno);
  absl::StatusOr<uint64_t> before = EventCount(MADVISE_EVENT_SELF_CHECK);
  int rc = madvise(area, MADVISE_SELF_CHECK_BYTES, MADV_NORMAL);
  int err = errno;
  absl::StatusOr<uint64_t> after = EventCount(MADVISE_EVENT_SELF_CHECK);
  munmap(area, mapped);
  if (rc != 0) return LibbpfError("kpathd's madvise check call", err);
  if (!before.ok()) return before.status();
  if (!after.ok()) return after.status();
  // The programs ran before madvise returned: attached and on the call's path, they saw it.
  if (*after > *before) return absl::OkStatus();
  return BlindHookError(fmt::format(
      "kpathd's own madvise(2) call did not reach {} {}: the system call does not go through it "
      "on this kernel (inlined into it?)",
      MechanismName(plan.mechanism), plan.target));
}

std::optional<absl::Status> MadviseProbe::SelfTest() {
  if (!attached_plan_ || events_fd_ < 0) return absl::FailedPreconditionError("not attached");
  return CheckHookSeesCalls(*attached_plan_);
}

void MadviseProbe::Detach() {
  BpfProbe::Detach();
  attached_plan_.reset();
  counts_.reset();
  tp_skel_.reset();
  fentry_skel_.reset();
  buffer_fds_[0] = buffer_fds_[1] = -1;
  events_fd_ = -1;
}

std::string MadviseProbe::OnAttached() {
  spdlog::info("probe {}: process_madvise {}", kName, process_madvise_);
  return fmt::format("process_madvise {}", process_madvise_);
}

void MadviseProbe::SetLabelLimits(const LabelLimits& limits) {
  options_.labels = limits;
  folded_.SetTopN(TopN(limits));
}

absl::Status MadviseProbe::Collect(MetricFamilies& out) {
  if (!counts_) return absl::FailedPreconditionError("probe not attached");

  // This interval's calls by process, before folding: the STATUS line names the busiest.
  std::map<std::string, uint64_t> calls_by_comm;
  absl::Status drained = counts_->Drain([&](const void* key, std::span<const uint64_t> sums) {
    // Reserved overflow keys are drained every interval, mostly still zero: no series for them.
    if (std::all_of(sums.begin(), sums.end(), [](uint64_t v) { return v == 0; })) return;
    if (key == nullptr) {  // the buffer's last-resort overflow slot
      folded_.AddOther(sums);
      return;
    }
    const auto* k = static_cast<const madvise_key*>(key);
    std::string advice(MadviseAdviceName(k->advice));
    if (k->comm[0] == '\0') {  // a reserved overflow key: the hash was full
      std::vector<std::string> labels = Labels(FoldedCounters::kOther, std::move(advice), 0);
      std::fill(labels.begin() + 2, labels.end(), FoldedCounters::kOther);
      folded_.Add(labels, sums);
      return;
    }
    std::string comm = CommLabel(k->comm, sizeof(k->comm));
    calls_by_comm[comm] += sums.empty() ? 0 : sums[0];
    folded_.Add(Labels(std::move(comm), std::move(advice), k->owner), sums);
  });
  pod_labels_.EndInterval();
  // The drain emptied the buffer, reserved keys included: put them back before it is active.
  absl::Status reserved = InsertReservedKeys();
  if (!drained.ok()) return drained;
  if (!reserved.ok()) return reserved;
  folded_.EndInterval();

  auto now = clock_();
  double seconds = std::chrono::duration<double>(now - last_drain_).count();
  last_drain_ = now;
  top_comm_.clear();
  top_calls_per_second_ = 0;
  uint64_t top_calls = 0;
  for (const auto& [comm, calls] : calls_by_comm) {
    if (calls > top_calls) {
      top_calls = calls;
      top_comm_ = comm;
    }
  }
  if (seconds > 0) top_calls_per_second_ = static_cast<double>(top_calls) / seconds;
  if (event_sink_ && seconds > 0) {
    std::map<std::string, double> rates;
    for (const auto& [comm, calls] : calls_by_comm)
      rates[comm] = static_cast<double>(calls) / seconds;
    for (Event& event : storms_.Update(rates, storm_threshold_, absl::Now())) {
      event_sink_->Emit(std::move(event));
    }
  }

  for (uint32_t e = 0; e < MADVISE_EVENT_MAX; ++e) {
    absl::StatusOr<uint64_t> n = EventCount(e);
    if (!n.ok()) return n.status();
    events_[e] = *n;
  }

  folded_.AppendFamilies(madvise_metrics::kMadviseCallsTotal,
                         madvise_metrics::kMadviseCallsEvictedTotal, 0, out);
  folded_.AppendFamilies(madvise_metrics::kMadviseBytesTotal,
                         madvise_metrics::kMadviseBytesEvictedTotal, 1, out);
  FamilyBuilder(health_metrics::kEventsLostTotal)
      .Add({{"probe", std::string(kName)}, {"reason", "iovec_read_error"}},
           static_cast<double>(events_[MADVISE_EVENT_IOVEC_READ_ERROR]))
      .AppendTo(out);
  return absl::OkStatus();
}

std::string MadviseProbe::StatusFragment() const {
  return MadviseStormFragment(top_comm_, top_calls_per_second_, storm_threshold_);
}

}  // namespace kpath
