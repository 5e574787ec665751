#include "probes/percpu/percpu_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "fmt/format.h"
#include "percpu.skel.h"
#include "probes/collect/health_metrics.h"
#include "probes/collect/human_units.h"
#include "probes/collect/label_values.h"
#include "probes/percpu/percpu.h"
#include "probes/percpu/percpu_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {
// Allocator entry points, newest first: 6.10 renamed the allocator to pcpu_alloc_noprof (with
// __alloc_percpu_gfp a macro over it); before, pcpu_alloc was the static worker behind the
// exported __alloc_percpu_gfp.
constexpr std::string_view kAllocatorFunctions[] = {"pcpu_alloc_noprof", "pcpu_alloc",
                                                    "__alloc_percpu_gfp"};

std::string TracepointName(std::string_view event) {
  return fmt::format("{}:{}", PercpuAllocProbe::kCategory, event);
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }
}  // namespace

bool IsPercpuPlumbingFrame(std::string_view fn) {
  // The allocator and its wrappers.
  static constexpr std::array kAllocator = {
      "pcpu_",
      "__pcpu_",
      "__alloc_percpu",
      "__alloc_reserved_percpu",
  };
  // The tracing plumbing between the event and the BPF program, named precisely: BPF's own
  // allocations (bpf_map_alloc_percpu, bpf_prog_alloc), perf's and tracing's are real callers.
  // A BPF program's own frame is its JIT symbol (BpfProgramName).
  static constexpr std::array kTracing = {
      "bpf_trace_run",    "__bpf_trace_",    "___bpf_prog_run",
      "__bpf_prog_enter", "__bpf_prog_exit", "bpf_trampoline_",
      "trace_call_bpf",   "perf_trace_",     "perf_tp_event",
      "kprobe_",          "__kprobes",       "kretprobe_",
      "ftrace_",          "arch_ftrace_",    "fentry_",
      "__probestub_",     "rethook_",        "trace_event_raw_event_",
  };
  for (std::string_view p : kAllocator)
    if (StartsWith(fn, p)) return true;
  for (std::string_view p : kTracing)
    if (StartsWith(fn, p)) return true;
  return BpfProgramName(fn).has_value() || fn == "unknown";
}

std::string PercpuCallerName(std::span<const unsigned long long> frames,
                             KernelSymbolizer& symbols) {
  // Frames above the allocator's own are the hook: an fentry program and its trampoline, which
  // kallsyms lists only with net.core.bpf_jit_kallsyms=1 and otherwise names as whatever
  // function lies below them (seen on Debian's 6.1 under QEMU: "exit_amd_microcode"). When the
  // allocator is on the stack, the caller is looked for past its outermost frame.
  size_t start = 0;
  for (size_t i = 0; i < frames.size() && frames[i] != 0; ++i) {
    std::string_view fn = symbols.Symbolize(frames[i]);
    if (fn.starts_with("pcpu_alloc") || fn.starts_with("__alloc_percpu") ||
        fn.starts_with("__alloc_reserved_percpu")) {
      start = i;
    }
  }
  for (unsigned long long address : frames.subspan(start)) {
    if (address == 0) break;
    const std::string& fn = symbols.Symbolize(address);
    if (!IsPercpuPlumbingFrame(fn)) return fn;
  }
  return "unknown";
}

PercpuAllocProbe::PercpuAllocProbe(KernelFeatures& kernel, HostPaths paths,
                                   PercpuProbeOptions options)
    : kernel_(kernel),
      paths_(paths),
      options_(std::move(options)),
      symbols_(paths),
      allocs_(
          {"comm", "caller"},
          {static_cast<size_t>(options_.labels.comm), static_cast<size_t>(options_.labels.caller)},
          2),
      events_(PERCPU_EVENT_MAX, 0) {}

PercpuAllocProbe::~PercpuAllocProbe() { Detach(); }

void PercpuAllocProbe::SetLabelLimits(const LabelLimits& limits) {
  options_.labels = limits;
  allocs_.SetTopN({static_cast<size_t>(limits.comm), static_cast<size_t>(limits.caller)});
}

std::vector<AttachPlan> PercpuAllocProbe::Plans() const {
  std::vector<AttachPlan> plans = {
      {Mechanism::kTpBtf, TracepointName(kEvent)},
      {Mechanism::kRawTp, TracepointName(kEvent)},
      {Mechanism::kTracepoint, TracepointName(kEvent)},
  };
  for (Mechanism m : {Mechanism::kFentry, Mechanism::kKprobe}) {
    for (std::string_view fn : kAllocatorFunctions) plans.push_back({m, std::string(fn)});
  }
  return plans;
}

PercpuAllocProbe::Layout PercpuAllocProbe::TracepointLayout(KernelFeatures& kernel) {
  if (std::optional<int> args = kernel.BtfTracepointArgs(kEvent)) {
    if (*args >= 9) return Layout::kWithBytesAlloc;
    if (*args >= 7) return Layout::kLegacy;
    return Layout::kUnknown;
  }
  absl::StatusOr<TracepointFormat> format = kernel.Tracepoint(kCategory, kEvent);
  if (!format.ok()) return Layout::kUnknown;
  return format->Find("bytes_alloc") ? Layout::kWithBytesAlloc : Layout::kLegacy;
}

absl::Status PercpuAllocProbe::Supported(const AttachPlan& plan, KernelFeatures& kernel) {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      if (!kernel.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel.BtfTracepointArgs(kEvent) || !kernel.BtfTracepointArgs(kFreeEvent))
        return absl::NotFoundError("percpu tracepoints not in BTF");
      return absl::OkStatus();
    case Mechanism::kRawTp:
      if (!kernel.TracepointExists(kCategory, kEvent) ||
          !kernel.TracepointExists(kCategory, kFreeEvent))
        return absl::NotFoundError("kernel has no percpu tracepoints");
      if (TracepointLayout(kernel) == Layout::kUnknown)
        return absl::UnavailableError("argument layout unknown (no BTF and no tracefs format)");
      return absl::OkStatus();
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      absl::StatusOr<TracepointFormat> free_format = kernel.Tracepoint(kCategory, kFreeEvent);
      if (!free_format.ok()) return free_format.status();
      if (!format->Find("size") || !format->Find("ptr") || !free_format->Find("ptr"))
        return absl::NotFoundError("format lacks the size or ptr field");
      return absl::OkStatus();
    }
    case Mechanism::kFentry:
      if (!kernel.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel.BtfHasFunction(plan.target)) return absl::NotFoundError("function not in BTF");
      return absl::OkStatus();
    case Mechanism::kKprobe: {
      if (absl::Status s = kernel.KprobesAvailable(); !s.ok()) return s;
      if (!kernel.KernelFunction(plan.target))
        return absl::NotFoundError("function not in kallsyms");
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

std::string_view LiveAllocTrackingName(LiveAllocTracking tracking) {
  switch (tracking) {
    case LiveAllocTracking::kTable:
      return "array table";
    case LiveAllocTracking::kHashMap:
      return "hash map";
    case LiveAllocTracking::kNone:
      break;
  }
  return "none";
}

absl::Status PercpuAllocProbe::Attach(const AttachPlan& plan, KernelFeatures& kernel) {
  Detach();
  bool load_failed = false;
  if (plan.mechanism == Mechanism::kFentry || plan.mechanism == Mechanism::kKprobe) {
    return AttachWith(plan, kernel, LiveAllocTracking::kNone, load_failed);
  }
  // The table needs BPF atomics (compare-and-swap, Linux 5.12+): ask the kernel by loading it.
  std::string refused = "off by option";
  if (options_.live_table) {
    absl::Status table = AttachWith(plan, kernel, LiveAllocTracking::kTable, load_failed);
    if (table.ok() || !load_failed) return table;
    refused = std::string(table.message());
  }
  absl::Status hash = AttachWith(plan, kernel, LiveAllocTracking::kHashMap, load_failed);
  if (!hash.ok()) {
    return absl::Status(hash.code(),
                        fmt::format("{} (array table: {})", std::string(hash.message()), refused));
  }
  spdlog::info("probe {}: live allocations in a hash map (array table: {})", kName, refused);
  return absl::OkStatus();
}

absl::Status PercpuAllocProbe::AttachWith(const AttachPlan& plan, KernelFeatures& kernel,
                                          LiveAllocTracking tracking, bool& load_failed) {
  load_failed = false;
  OwnedSkeleton<percpu_bpf> skel(percpu_bpf__open(), percpu_bpf__destroy);
  if (!skel) return LibbpfError("open", errno);

  bool legacy = false;
  if (plan.mechanism == Mechanism::kTpBtf || plan.mechanism == Mechanism::kRawTp) {
    legacy = TracepointLayout(kernel) == Layout::kLegacy;
  }
  const bool table = tracking == LiveAllocTracking::kTable;
  bpf_program* alloc = nullptr;
  bpf_program* free = nullptr;  // entry probes see no pointer: frees are not matched
  // Tracepoint programs are named percpu_{alloc,free}_<mechanism>[_legacy][_hash]
  // (percpu.bpf.c): the argument layout, then the way live allocations are kept.
  auto program = [&](std::string_view event, bool legacy_layout) {
    return bpf_object__find_program_by_name(
        skel->obj, fmt::format("percpu_{}_{}{}{}", event, MechanismName(plan.mechanism),
                               legacy_layout ? "_legacy" : "", table ? "" : "_hash")
                       .c_str());
  };
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
    case Mechanism::kRawTp:
      alloc = program("alloc", legacy);
      free = program("free", false);
      break;
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      absl::StatusOr<TracepointFormat> free_format = kernel.Tracepoint(kCategory, kFreeEvent);
      if (!free_format.ok()) return free_format.status();
      const TracepointField* size = format->Find("size");
      const TracepointField* ptr = format->Find("ptr");
      const TracepointField* free_ptr = free_format->Find("ptr");
      if (!size || !ptr || !free_ptr) return absl::NotFoundError("format lacks size or ptr");
      skel->rodata->tp_size_offset = size->offset;
      skel->rodata->tp_size_size = size->size;
      skel->rodata->tp_ptr_offset = ptr->offset;
      skel->rodata->tp_free_ptr_offset = free_ptr->offset;
      if (const TracepointField* bytes = format->Find("bytes_alloc")) {
        skel->rodata->tp_bytes_alloc_offset = bytes->offset;
        skel->rodata->tp_bytes_alloc_size = bytes->size;
      }
      if (const TracepointField* call_site = format->Find("call_site")) {
        skel->rodata->tp_call_site_offset = call_site->offset;
      }
      alloc = program("alloc", false);
      free = program("free", false);
      break;
    }
    case Mechanism::kFentry: {
      alloc = skel->progs.percpu_alloc_fentry;
      int err = bpf_program__set_attach_target(alloc, 0, plan.target.c_str());
      if (err) return LibbpfError("set fentry target", err);
      break;
    }
    case Mechanism::kKprobe:
      alloc = skel->progs.percpu_alloc_kprobe;
      break;
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
  if (!alloc || (tracking != LiveAllocTracking::kNone && !free)) {
    return absl::InternalError("percpu programs missing from the BPF object");
  }

  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel->obj) {
    bpf_program__set_autoload(prog, prog == alloc || prog == free);
  }
  skel->rodata->nr_possible_cpus = static_cast<__u32>(kernel.PossibleCpus());
  skel->rodata->caller_from_stack_always = options_.caller_from_stack;

  // The table reads the comm (and the process, to keep kpathd's own allocations out of the hot
  // part) from the task where the kernel has BTF: it has bpf_get_current_task_btf wherever it
  // has the table's atomics.
  if (table && kernel.HasVmlinuxBtf()) {
    std::optional<uint32_t> comm = kernel.BtfMemberOffset("task_struct", "comm");
    std::optional<uint32_t> tgid = kernel.BtfMemberOffset("task_struct", "tgid");
    skel->rodata->task_comm_offset = comm.value_or(0);
    if (comm && tgid) {  // the task pointer comes with the comm offset
      skel->rodata->task_tgid_offset = *tgid;
      skel->rodata->self_tgid = getpid();
    }
  }
  // Only the maps of the chosen way get their size; the others shrink to one entry. The table's
  // spill part has at least twice as many slots as allocations tracked, so that it stays at
  // most half full and probe sequences short (2^26 slots of 16 bytes at most).
  uint32_t tracked = std::max<uint32_t>(options_.max_tracked_allocations, 1);
  uint32_t bits = 1;
  while (bits < 26 && (uint64_t{1} << bits) < 2 * uint64_t{tracked}) ++bits;
  skel->rodata->live_table_bits = table ? bits : 0;
  const uint32_t table_slots = table ? PERCPU_LIVE_HOT_SLOTS + (1U << bits) : 1U;
  struct Size {
    bpf_map* map;
    uint32_t entries;
  };
  for (const Size& size :
       {Size{skel->maps.live_table, table_slots},
        Size{skel->maps.live_callers, table ? PERCPU_LIVE_CALLERS : 1U},
        Size{skel->maps.live_allocs, tracking == LiveAllocTracking::kHashMap ? tracked : 1U},
        Size{skel->maps.caller_balance_0, tracking == LiveAllocTracking::kHashMap ? 512U : 1U},
        Size{skel->maps.caller_balance_1, tracking == LiveAllocTracking::kHashMap ? 512U : 1U}}) {
    if (int err = bpf_map__set_max_entries(size.map, size.entries); err) {
      return LibbpfError(fmt::format("size {}", bpf_map__name(size.map)), err);
    }
  }
  // Kernels before 5.5 refuse mmap-able arrays; only the table needs one.
  if (!table) {
    if (int err = bpf_map__set_map_flags(skel->maps.live_callers, 0); err) {
      return LibbpfError("set live_callers flags", err);
    }
  }

  if (int err = percpu_bpf__load(skel.get()); err) {
    load_failed = true;
    return LibbpfError("load", err);
  }

  std::vector<OwnedLink> links;
  // The free program first: an allocation is never tracked without its free being watched.
  for (bpf_program* p : {free, alloc}) {
    if (!p) continue;
    bpf_link* link = nullptr;
    if (p == alloc && plan.mechanism == Mechanism::kKprobe) {
      std::optional<std::string> symbol = kernel.KernelFunction(plan.target);
      if (!symbol) return absl::NotFoundError("function not in kallsyms");
      link = bpf_program__attach_kprobe(p, /*retprobe=*/false, symbol->c_str());
    } else {
      link = bpf_program__attach(p);
    }
    if (!link) return LibbpfError(fmt::format("attach {}", bpf_program__name(p)), errno);
    links.emplace_back(link);
  }

  absl::StatusOr<KeyedCounterMaps> alloc_maps = KeyedCounterMaps::Find(skel->obj, "alloc_counts");
  if (!alloc_maps.ok()) return alloc_maps.status();
  absl::StatusOr<KeyedCounterMaps> balance_maps =
      KeyedCounterMaps::Find(skel->obj, "caller_balance");
  if (!balance_maps.ok()) return balance_maps.status();

  // Read in place: which caller indices are in use, and their functions.
  MappedArray callers_map;
  if (table) {
    absl::StatusOr<MappedArray> callers = MappedArray::Of(skel->maps.live_callers);
    if (!callers.ok()) return callers.status();
    callers_map = *std::move(callers);
  }

  programs_.clear();
  for (bpf_program* p : {alloc, free}) {
    if (p) programs_.push_back({std::string(kName), bpf_program__name(p), bpf_program__fd(p)});
  }
  tracks_frees_ = free != nullptr;
  tracking_ = tracking;
  live_callers_ = std::move(callers_map);
  alloc_maps_ = *std::move(alloc_maps);
  balance_maps_ = *std::move(balance_maps);
  links_ = std::move(links);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

absl::StatusOr<MappedArray> MappedArray::Of(bpf_map* map) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t bytes = size_t{bpf_map__max_entries(map)} * bpf_map__value_size(map);
  MappedArray mapped;
  mapped.bytes_ = (bytes + page - 1) / page * page;
  void* m = mmap(nullptr, mapped.bytes_, PROT_READ, MAP_SHARED, bpf_map__fd(map), 0);
  if (m == MAP_FAILED) return LibbpfError(fmt::format("mmap {}", bpf_map__name(map)), errno);
  mapped.data_ = m;
  mapped.entries_ = bpf_map__max_entries(map);
  return mapped;
}

MappedArray& MappedArray::operator=(MappedArray&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    entries_ = std::exchange(other.entries_, 0);
  }
  return *this;
}

MappedArray::~MappedArray() {
  if (data_) munmap(data_, bytes_);
}

void PercpuAllocProbe::Detach() {
  links_.clear();
  live_callers_ = MappedArray();
  skel_.reset();
  programs_.clear();
  alloc_maps_.reset();
  balance_maps_.reset();
  tracking_ = LiveAllocTracking::kNone;
}

absl::Status PercpuAllocProbe::Start() {
  if (absl::Status s = symbols_.Refresh(); !s.ok()) {
    spdlog::warn("probe {}: callers will be \"unknown\": {}", kName, std::string(s.message()));
  }
  if (absl::Status s = StartProbe(*this, kernel_, options_.allowed, state_); !s.ok()) return s;
  state_.detail =
      fmt::format("{}; live allocations: {}", state_.detail, LiveAllocTrackingName(tracking_));
  if (tracks_frees_) {
    spdlog::info("probe {}: live allocations tracked in the {} ({} at most)", kName,
                 LiveAllocTrackingName(tracking_), options_.max_tracked_allocations);
  } else {
    spdlog::info(
        "probe {}: {} sees allocations at entry, without their pointer: "
        "kpath_percpu_outstanding_bytes is not exported",
        kName, MechanismName(state_.mechanism));
  }
  return absl::OkStatus();
}

std::vector<OwnBpfProgram> PercpuAllocProbe::Programs() const { return programs_; }

const std::string& PercpuAllocProbe::CallerName(uint64_t caller) {
  // Names change only when kallsyms is reloaded (a module came or went).
  if (symbols_.reloads() != caller_names_generation_) {
    caller_names_.clear();
    caller_names_generation_ = symbols_.reloads();
  }
  auto it = caller_names_.find(caller);
  if (it != caller_names_.end()) return it->second;
  std::string name = "unknown";
  if (PERCPU_CALLER_IS_STACK(caller)) {
    __u32 id = static_cast<__u32>(caller - 1);
    std::array<unsigned long long, PERCPU_CALLER_FRAMES> frames{};
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.caller_stacks), &id, frames.data()) == 0) {
      name = PercpuCallerName(frames, symbols_);
    }
  } else if (caller != 0) {
    unsigned long long site[1] = {caller};
    name = PercpuCallerName(site, symbols_);
  }
  if (caller_names_.size() > 100000) caller_names_.clear();
  return caller_names_.emplace(caller, std::move(name)).first->second;
}

absl::Status PercpuAllocProbe::DrainCounters() {
  // Allocations by (comm, caller); the interval's biggest consumer feeds the STATUS line.
  std::string top_key;
  uint64_t top_bytes = 0;
  absl::Status s = alloc_maps_->Drain([&](const void* key, std::span<const uint64_t> sums) {
    if (!key) {
      allocs_.AddOther(sums);
      return;
    }
    const auto* k = static_cast<const percpu_alloc_key*>(key);
    std::string comm = CommLabel(k->comm, sizeof(k->comm));
    std::string caller = CallerName(k->caller);
    if (sums[1] > top_bytes) {
      top_bytes = sums[1];
      top_key = fmt::format("{}/{}", comm, caller);
    }
    allocs_.Add({std::move(comm), std::move(caller)}, sums);
  });
  if (!s.ok()) return s;
  allocs_.EndInterval();

  absl::Time now = absl::Now();
  double seconds =
      last_collect_ == absl::InfinitePast() ? 0 : absl::ToDoubleSeconds(now - last_collect_);
  last_collect_ = now;
  status_ = top_bytes > 0 && seconds > 0
                ? fmt::format("percpu top {} {}/s", top_key,
                              FormatBytesIEC(static_cast<double>(top_bytes) / seconds))
                : std::string();

  if (tracking_ == LiveAllocTracking::kTable) {
    SumLiveBalance();
    // A new interval: allocations from now on are younger than those already in the table.
    uint32_t zero = 0;
    ++live_epoch_;
    bpf_map_update_elem(bpf_map__fd(skel_->maps.live_epoch), &zero, &live_epoch_, BPF_ANY);
    return absl::OkStatus();
  }
  if (tracking_ != LiveAllocTracking::kHashMap) return absl::OkStatus();
  return balance_maps_->Drain([&](const void* key, std::span<const uint64_t> sums) {
    std::string caller =
        key ? CallerName(*static_cast<const __u64*>(key)) : std::string(FoldedCounters::kOther);
    outstanding_[caller] += static_cast<int64_t>(sums[0]) - static_cast<int64_t>(sums[1]);
  });
}

void PercpuAllocProbe::SumLiveBalance() {
  // Cumulative per CPU, by caller index: outstanding = allocated - freed, summed over CPUs, for
  // the indices in use (0, "unknown", and those live_callers names).
  int ncpus = std::max(libbpf_num_possible_cpus(), 1);
  std::vector<percpu_live_balance> per_cpu(static_cast<size_t>(ncpus));
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.live_balance), &zero, per_cpu.data()) != 0) {
    return;  // the last figures stay
  }
  const auto* callers = static_cast<const uint64_t*>(live_callers_.data());
  outstanding_.clear();
  for (uint32_t index = 0; index < PERCPU_LIVE_CALLERS && index < live_callers_.entries();
       ++index) {
    uint64_t caller = index == 0 ? 0 : __atomic_load_n(&callers[index], __ATOMIC_ACQUIRE);
    if (index != 0 && caller == 0) continue;
    int64_t held = 0;
    for (const percpu_live_balance& cpu : per_cpu) {
      held += static_cast<int64_t>(cpu.callers[index].allocated_bytes) -
              static_cast<int64_t>(cpu.callers[index].freed_bytes);
    }
    if (index != 0 || held != 0) outstanding_[CallerName(caller)] += held;
  }
}

absl::Status PercpuAllocProbe::Collect(MetricFamilies& out) {
  if (!skel_) return absl::FailedPreconditionError("probe not attached");
  if (absl::Status s = symbols_.Refresh(); !s.ok()) {
    spdlog::debug("probe {}: kallsyms refresh failed: {}", kName, std::string(s.message()));
  }
  if (absl::Status s = DrainCounters(); !s.ok()) return s;

  // Event counters are cumulative in the kernel: sum the CPUs.
  int ncpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> per_cpu(static_cast<size_t>(std::max(ncpus, 1)));
  for (uint32_t e = 0; e < PERCPU_EVENT_MAX; ++e) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.events), &e, per_cpu.data()) != 0) continue;
    uint64_t sum = 0;
    for (uint64_t v : per_cpu) sum += v;
    events_[e] = sum;
  }

  FamilyBuilder allocs(percpu_metrics::kAllocsTotal);
  allocs_.AppendTo(allocs, 0);
  allocs.AppendTo(out);
  FamilyBuilder bytes(percpu_metrics::kAllocBytesTotal);
  allocs_.AppendTo(bytes, 1);
  bytes.AppendTo(out);

  if (tracks_frees_) {
    // The callers holding the most, the rest folded into "other".
    std::vector<std::pair<int64_t, std::string>> ranked;
    for (const auto& [caller, held] : outstanding_) ranked.emplace_back(held, caller);
    std::sort(ranked.begin(), ranked.end(), std::greater<>());
    FamilyBuilder outstanding(percpu_metrics::kOutstandingBytes);
    int64_t other = 0;
    size_t limit = static_cast<size_t>(std::max(options_.labels.caller, 1));
    for (size_t i = 0; i < ranked.size(); ++i) {
      if (i < limit && ranked[i].second != FoldedCounters::kOther) {
        outstanding.Add({{"caller", ranked[i].second}}, static_cast<double>(ranked[i].first));
      } else {
        other += ranked[i].first;
      }
    }
    if (other != 0 || ranked.size() > limit) {
      outstanding.Add({{"caller", FoldedCounters::kOther}}, static_cast<double>(other));
    }
    outstanding.AppendTo(out);
  }

  FamilyBuilder(health_metrics::kEventsLostTotal)
      .Add({{"probe", std::string(kName)}, {"reason", "tracking_map_full"}},
           static_cast<double>(events_[PERCPU_EVENT_LIVE_MAP_FULL]))
      .AppendTo(out);
  FamilyBuilder(percpu_metrics::kUntrackedFreesTotal)
      .Add(static_cast<double>(events_[PERCPU_EVENT_UNTRACKED_FREE]))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
