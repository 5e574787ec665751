#include "probes/percpu/percpu_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "percpu.legacy.skel.h"
#include "percpu.skel.h"
#include "probes/collect/bpf_maps.h"
#include "probes/collect/bpf_skeleton.h"
#include "probes/collect/health_metrics.h"
#include "probes/collect/human_units.h"
#include "probes/collect/label_values.h"
#include "probes/kernel/kallsyms.h"
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

// The allocator's exported wrappers around pcpu_alloc (before 6.10; macros since).
constexpr std::array<std::string_view, PERCPU_ALLOCATOR_WRAPPERS> kAllocatorWrappers = {
    "__alloc_percpu_gfp", "__alloc_percpu", "__alloc_reserved_percpu"};

// Each wrapper's text, from its address to the next function's (kallsyms), for percpu.bpf.c's
// allocator_wrapper_begin/end: a tracepoint call_site inside one is not the caller. Left 0 where
// kallsyms cannot be read or hides its addresses: the call_site is then taken as it is.
void SetAllocatorWrapperText(percpu_bpf* skel, const KallsymsIndex* kallsyms) {
  if (kallsyms == nullptr) return;
  for (size_t i = 0; i < kAllocatorWrappers.size(); ++i) {
    if (auto text = kallsyms->FunctionText(kAllocatorWrappers[i])) {
      skel->rodata->allocator_wrapper_begin[i] = text->first;
      skel->rodata->allocator_wrapper_end[i] = text->second;
    }
  }
}

std::string TracepointName(std::string_view event) {
  return fmt::format("{}:{}", PercpuAllocProbe::kCategory, event);
}

// The programs that see the pointer (percpu.bpf.c), by mechanism and by the way live allocations
// are kept: the allocation's for each argument layout of the tracepoint, and the free's.
using PercpuPrograms = decltype(percpu_bpf::progs);
struct TrackedPrograms {
  Mechanism mechanism;
  LiveAllocTracking tracking;
  bpf_program* PercpuPrograms::*alloc;
  bpf_program* PercpuPrograms::*alloc_legacy;  // before bytes_alloc (tp_btf and raw_tp only)
  bpf_program* PercpuPrograms::*free;
};
constexpr TrackedPrograms kTrackedPrograms[] = {
    {Mechanism::kTpBtf, LiveAllocTracking::kTable, &PercpuPrograms::percpu_alloc_tp_btf,
     &PercpuPrograms::percpu_alloc_tp_btf_legacy, &PercpuPrograms::percpu_free_tp_btf},
    {Mechanism::kTpBtf, LiveAllocTracking::kHashMap, &PercpuPrograms::percpu_alloc_tp_btf_hash,
     &PercpuPrograms::percpu_alloc_tp_btf_legacy_hash, &PercpuPrograms::percpu_free_tp_btf_hash},
    {Mechanism::kRawTp, LiveAllocTracking::kTable, &PercpuPrograms::percpu_alloc_raw_tp,
     &PercpuPrograms::percpu_alloc_raw_tp_legacy, &PercpuPrograms::percpu_free_raw_tp},
    {Mechanism::kRawTp, LiveAllocTracking::kHashMap, &PercpuPrograms::percpu_alloc_raw_tp_hash,
     &PercpuPrograms::percpu_alloc_raw_tp_legacy_hash, &PercpuPrograms::percpu_free_raw_tp_hash},
    {Mechanism::kTracepoint, LiveAllocTracking::kTable, &PercpuPrograms::percpu_alloc_tracepoint,
     nullptr, &PercpuPrograms::percpu_free_tracepoint},
    {Mechanism::kTracepoint, LiveAllocTracking::kHashMap,
     &PercpuPrograms::percpu_alloc_tracepoint_hash, nullptr,
     &PercpuPrograms::percpu_free_tracepoint_hash},
    {Mechanism::kTpBtf, LiveAllocTracking::kLog, &PercpuPrograms::percpu_alloc_tp_btf_log,
     &PercpuPrograms::percpu_alloc_tp_btf_legacy_log, &PercpuPrograms::percpu_free_tp_btf_log},
    {Mechanism::kRawTp, LiveAllocTracking::kLog, &PercpuPrograms::percpu_alloc_raw_tp_log,
     &PercpuPrograms::percpu_alloc_raw_tp_legacy_log, &PercpuPrograms::percpu_free_raw_tp_log},
    {Mechanism::kTracepoint, LiveAllocTracking::kLog, &PercpuPrograms::percpu_alloc_tracepoint_log,
     nullptr, &PercpuPrograms::percpu_free_tracepoint_log},
};

const TrackedPrograms* TrackedProgramsFor(Mechanism mechanism, LiveAllocTracking tracking) {
  for (const TrackedPrograms& row : kTrackedPrograms) {
    if (row.mechanism == mechanism && row.tracking == tracking) return &row;
  }
  return nullptr;
}
}  // namespace

PercpuAllocProbe::PercpuAllocProbe(KernelFeatures& kernel, HostPaths paths,
                                   PercpuProbeOptions options)
    : BpfProbe(kName, kernel, options.allowed),
      paths_(paths),
      options_(std::move(options)),
      symbols_(paths),
      pod_labels_(options_.pods),
      allocs_(pod_labels_.Names({"comm", "caller"}), TopN(options_.labels), 2),
      events_(PERCPU_EVENT_MAX, 0) {}

PercpuAllocProbe::~PercpuAllocProbe() { Detach(); }

std::vector<size_t> PercpuAllocProbe::TopN(const LabelLimits& limits) const {
  return pod_labels_.TopN({static_cast<size_t>(limits.comm), static_cast<size_t>(limits.caller)},
                          limits.pod);
}

void PercpuAllocProbe::SetLabelLimits(const LabelLimits& limits) {
  options_.labels = limits;
  allocs_.SetTopN(TopN(limits));
}

std::vector<AttachPlan> PercpuAllocProbe::Plans() const {
  return PlansFor(kMechanisms, kDefaultMechanisms, [](Mechanism m) -> std::vector<std::string> {
    if (m == Mechanism::kFentry || m == Mechanism::kKprobe) {
      return {std::begin(kAllocatorFunctions), std::end(kAllocatorFunctions)};
    }
    return {TracepointName(kEvent)};
  });
}

PercpuAllocProbe::Layout PercpuAllocProbe::TracepointLayout() {
  switch (kernel_.Layout().PercpuAlloc()) {
    case PercpuAllocLayout::kWithBytesAlloc:
      return Layout::kWithBytesAlloc;
    case PercpuAllocLayout::kLegacy:
      return Layout::kLegacy;
    case PercpuAllocLayout::kUnknown:
      break;
  }
  return Layout::kUnknown;
}

absl::Status PercpuAllocProbe::Supported(const AttachPlan& plan) {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      if (!kernel_.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (const TracepointArity& arity = kernel_.Layout().Tracepoints();
          !arity.percpu_alloc_percpu || !arity.percpu_free_percpu) {
        return absl::NotFoundError("percpu tracepoints not in BTF");
      }
      return absl::OkStatus();
    case Mechanism::kRawTp:
      if (!kernel_.TracepointExists(kCategory, kEvent) ||
          !kernel_.TracepointExists(kCategory, kFreeEvent))
        return absl::NotFoundError("kernel has no percpu tracepoints");
      if (TracepointLayout() == Layout::kUnknown)
        return absl::UnavailableError("argument layout unknown (no BTF and no tracefs format)");
      return absl::OkStatus();
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      absl::StatusOr<TracepointFormat> free_format = kernel_.Tracepoint(kCategory, kFreeEvent);
      if (!free_format.ok()) return free_format.status();
      if (!format->Find("size") || !format->Find("ptr") || !free_format->Find("ptr"))
        return absl::NotFoundError("format lacks the size or ptr field");
      return absl::OkStatus();
    }
    case Mechanism::kFentry:
      if (!kernel_.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel_.BtfHasFunction(plan.target)) return absl::NotFoundError("function not in BTF");
      return absl::OkStatus();
    case Mechanism::kKprobe: {
      if (absl::Status s = kernel_.KprobesAvailable(); !s.ok()) return s;
      if (!kernel_.KernelFunction(plan.target))
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
    case LiveAllocTracking::kLog:
      return "allocation log";
    case LiveAllocTracking::kNone:
      break;
  }
  return "none";
}

absl::Status PercpuAllocProbe::Attach(const AttachPlan& plan) {
  Detach();
  bool load_failed = false;
  if (plan.mechanism == Mechanism::kFentry || plan.mechanism == Mechanism::kKprobe) {
    return AttachWith(plan, LiveAllocTracking::kNone, load_failed);
  }
  // The log and the table need BPF atomics (Linux 5.12+), the log mmap-able arrays (5.5): ask
  // the kernel by loading them.
  std::string refused = "off by option";
  // Asked first, so that kernels without them (5.10, 4.19) load no object in vain: each failed
  // load creates and frees the maps, per-CPU memory included.
  const bool atomics = kernel_.HasBpfAtomics();
  if (!atomics) refused = "no BPF atomics (Linux 5.12+)";
  if (atomics && options_.live_table && options_.allocation_log) {
    absl::Status log = AttachWith(plan, LiveAllocTracking::kLog, load_failed);
    if (log.ok() || !load_failed) return log;
    spdlog::info("probe {}: allocation log refused ({}), trying the array table", kName,
                 std::string(log.message()));
  }
  if (atomics && options_.live_table) {
    absl::Status table = AttachWith(plan, LiveAllocTracking::kTable, load_failed);
    if (table.ok() || !load_failed) return table;
    refused = std::string(table.message());
  }
  absl::Status hash = AttachWith(plan, LiveAllocTracking::kHashMap, load_failed);
  if (!hash.ok()) {
    return absl::Status(hash.code(),
                        fmt::format("{} (array table: {})", std::string(hash.message()), refused));
  }
  spdlog::info("probe {}: live allocations in a hash map (array table: {})", kName, refused);
  return absl::OkStatus();
}

absl::Status PercpuAllocProbe::AttachWith(const AttachPlan& plan, LiveAllocTracking tracking,
                                          bool& load_failed) {
  load_failed = false;
  OwnedSkeleton<percpu_bpf> skel = KPATH_OPEN_SKELETON(percpu, kernel_.HasBpfGlobalData());
  if (!skel) return LibbpfError("open", errno);

  bool legacy = false;
  if (plan.mechanism == Mechanism::kTpBtf || plan.mechanism == Mechanism::kRawTp) {
    legacy = TracepointLayout() == Layout::kLegacy;
  }
  const bool table = tracking == LiveAllocTracking::kTable;
  const bool log = tracking == LiveAllocTracking::kLog;
  bpf_program* alloc = nullptr;
  bpf_program* free = nullptr;  // entry probes see no pointer: frees are not matched
  const TrackedPrograms* programs = TrackedProgramsFor(plan.mechanism, tracking);
  if (programs) {
    alloc = skel->progs.*(legacy ? programs->alloc_legacy : programs->alloc);
    free = skel->progs.*programs->free;
  }
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
    case Mechanism::kRawTp:
      break;
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      absl::StatusOr<TracepointFormat> free_format = kernel_.Tracepoint(kCategory, kFreeEvent);
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

  EnableOnly(skel->obj, {alloc, free});
  skel->rodata->nr_possible_cpus = static_cast<__u32>(kernel_.PossibleCpus());
  skel->rodata->caller_from_stack_always = options_.caller_from_stack;
  SetAllocatorWrapperText(skel.get(), kernel_.Kallsyms().get());

  // The table reads the comm (and the process, to keep kpathd's own allocations out of the hot
  // part) from the task where the kernel has BTF: it has bpf_get_current_task_btf wherever it
  // has the table's atomics.
  if ((table || log) && kernel_.HasVmlinuxBtf()) {
    std::optional<uint32_t> comm = kernel_.Layout().Task().comm;
    std::optional<uint32_t> tgid = kernel_.Layout().Task().tgid;
    skel->rodata->task_comm_offset = comm.value_or(0);
    if (table && comm && tgid) {  // the task pointer comes with the comm offset
      skel->rodata->task_tgid_offset = *tgid;
    }
  }
  // The canary (SelfTest) is kpathd's: by its process id and the bytes of its allocation.
  skel->rodata->self_tgid = getpid();
  skel->rodata->percpu_owner = pod_labels_.OwnerKind();
  skel->rodata->self_pidns_dev = OwnPidNamespaceForBpf().dev;
  skel->rodata->self_pidns_ino = OwnPidNamespaceForBpf().ino;
  skel->rodata->self_check_bytes = uint64_t{PERCPU_SELF_CHECK_SIZE} * kernel_.PossibleCpus();
  // bytes_alloc (5.19+) adds a memcg pointer per 4 bytes: 2 x the size on 64-bit kernels.
  skel->rodata->self_check_slack = 2 * uint64_t{PERCPU_SELF_CHECK_SIZE};
  // Only the maps of the chosen way get their size; the others shrink to one entry. The table's
  // spill part has at least twice as many slots as allocations tracked, so that it stays at
  // most half full and probe sequences short (2^26 slots of 16 bytes at most).
  uint32_t tracked = std::max<uint32_t>(options_.max_tracked_allocations, 1);
  uint32_t bits = 1;
  while (bits < 26 && (uint64_t{1} << bits) < 2 * uint64_t{tracked}) ++bits;
  skel->rodata->live_table_bits = table ? bits : 0;
  const uint32_t table_slots = table ? PERCPU_LIVE_HOT_SLOTS + (1U << bits) : 1U;
  // The logs: 2^log_records_bits records per CPU, for each possible CPU, within a budget.
  const uint32_t log_cpus = static_cast<uint32_t>(std::max(libbpf_num_possible_cpus(), 1));
  const uint32_t log_bits = AllocationLogBits(log_cpus, options_.log_records_bits);
  skel->rodata->log_cpus = log_cpus;
  skel->rodata->log_records_bits = log_bits;
  const uint32_t log_records = log ? log_cpus << log_bits : 1U;
  struct Size {
    bpf_map* map;
    uint32_t entries;
  };
  for (const Size& size :
       {Size{skel->maps.live_table, table_slots},
        Size{skel->maps.live_callers, table ? PERCPU_LIVE_CALLERS : 1U},
        Size{skel->maps.live_allocs, tracking == LiveAllocTracking::kHashMap ? tracked : 1U},
        Size{skel->maps.caller_balance_0, tracking == LiveAllocTracking::kHashMap ? 512U : 1U},
        Size{skel->maps.caller_balance_1, tracking == LiveAllocTracking::kHashMap ? 512U : 1U},
        Size{skel->maps.plog_allocs, log_records}, Size{skel->maps.plog_frees, log_records},
        Size{skel->maps.plog_heads, log ? log_cpus : 1U},
        Size{skel->maps.plog_tails, log ? log_cpus : 1U},
        // A burst logged faster than it is read (30,000 allocations in one bpf() call: a
        // preallocated per-CPU hash map) spills here: as many as are tracked at most.
        Size{skel->maps.plog_spill, log ? tracked : 1U}}) {
    if (int err = bpf_map__set_max_entries(size.map, size.entries); err) {
      return LibbpfError(fmt::format("size {}", bpf_map__name(size.map)), err);
    }
  }
  // Kernels before 5.5 refuse mmap-able arrays; only the table needs live_callers.
  if (!table) {
    if (int err = bpf_map__set_map_flags(skel->maps.live_callers, 0); err) {
      return LibbpfError("set live_callers flags", err);
    }
  }
  // The log's maps are not even created for the other ways: each map a loaded object holds costs
  // per-CPU memory of its own (a hash map's locks), which kpath_percpu_bytes would show.
  for (bpf_map* map : {skel->maps.plog_allocs, skel->maps.plog_frees, skel->maps.plog_heads,
                       skel->maps.plog_tails, skel->maps.plog_order, skel->maps.plog_spill}) {
    if (int err = bpf_map__set_autocreate(map, log); err) {
      return LibbpfError(fmt::format("set {} autocreate", bpf_map__name(map)), err);
    }
  }

  if (int err = percpu_bpf__load(skel.get()); err) {
    load_failed = true;
    return LibbpfError("load", err);
  }
  if (absl::Status s = FillTunablesMap(skel->obj); !s.ok()) return s;

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

  std::unique_ptr<AllocationLogReader> log_reader;
  if (log) {
    absl::StatusOr<std::unique_ptr<AllocationLogReader>> reader =
        AllocationLogReader::Open({.allocs = skel->maps.plog_allocs,
                                   .frees = skel->maps.plog_frees,
                                   .heads = skel->maps.plog_heads,
                                   .tails = skel->maps.plog_tails,
                                   .order = skel->maps.plog_order,
                                   .spill = skel->maps.plog_spill,
                                   .cpus = log_cpus,
                                   .records_bits = log_bits},
                                  tracked);
    if (!reader.ok()) return reader.status();
    log_reader = *std::move(reader);
  }

  // The free program first: an allocation is never tracked without its free being watched.
  if (absl::Status s = AttachAndRemember({free, alloc}, plan); !s.ok()) return s;
  if (log_reader) log_reader->Start(options_.log_read_interval);
  log_ = std::move(log_reader);
  ListPrograms({alloc, free});
  tracks_frees_ = free != nullptr;
  tracking_ = tracking;
  live_callers_ = std::move(callers_map);
  alloc_maps_ = *std::move(alloc_maps);
  balance_maps_ = *std::move(balance_maps);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

void PercpuAllocProbe::Detach() {
  BpfProbe::Detach();
  if (log_) {
    AllocationLogReader::Stats stats = log_->stats();
    spdlog::info(
        "probe {}: allocation log: {} records in {} reads ({} spilled), {} of CPU reading them",
        kName, stats.records, stats.drains, stats.spilled, absl::FormatDuration(stats.busy));
  }
  log_.reset();
  log_untracked_frees_ = 0;
  log_not_tracked_ = 0;
  live_callers_ = MappedArray();
  skel_.reset();
  alloc_maps_.reset();
  balance_maps_.reset();
  tracking_ = LiveAllocTracking::kNone;
}

absl::Status PercpuAllocProbe::Start() {
  if (absl::Status s = symbols_.Refresh(); !s.ok()) {
    spdlog::warn("probe {}: callers will be \"unknown\": {}", kName, std::string(s.message()));
  }
  return BpfProbe::Start();
}

std::string PercpuAllocProbe::OnAttached() {
  if (tracks_frees_) {
    spdlog::info("probe {}: live allocations tracked in the {} ({} at most)", kName,
                 LiveAllocTrackingName(tracking_), options_.max_tracked_allocations);
  } else {
    spdlog::info(
        "probe {}: {} sees allocations at entry, without their pointer: "
        "kpath_percpu_outstanding_bytes is not exported",
        kName, MechanismName(state_.mechanism));
  }
  return fmt::format("live allocations: {}", LiveAllocTrackingName(tracking_));
}

const std::string& PercpuAllocProbe::CallerName(uint64_t caller) {
  // Names change only when the module/BPF part of kallsyms is re-read (a module or program came
  // or went).
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
    std::vector<std::string> labels{std::move(comm), std::move(caller)};
    pod_labels_.Append(labels, k->owner);
    allocs_.Add(labels, sums);
  });
  pod_labels_.EndInterval();
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
  if (tracking_ == LiveAllocTracking::kLog) {
    log_->WithLatest([&](const AllocationMatcher& matcher) {
      outstanding_.clear();
      for (const auto& [caller, held] : matcher.OutstandingByCaller()) {
        if (held != 0) outstanding_[CallerName(caller)] += held;
      }
      log_untracked_frees_ = matcher.untracked_frees();
      log_not_tracked_ = matcher.not_tracked();
    });
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
  absl::StatusOr<std::vector<percpu_live_balance>> per_cpu = ReadPerCpu<percpu_live_balance>(
      bpf_map__fd(skel_->maps.live_balance), 0, "read live_balance");
  if (!per_cpu.ok()) return;  // the last figures stay
  const auto* callers = static_cast<const uint64_t*>(live_callers_.data());
  outstanding_.clear();
  for (uint32_t index = 0; index < PERCPU_LIVE_CALLERS && index < live_callers_.entries();
       ++index) {
    uint64_t caller = index == 0 ? 0 : __atomic_load_n(&callers[index], __ATOMIC_ACQUIRE);
    if (index != 0 && caller == 0) continue;
    int64_t held = 0;
    for (const percpu_live_balance& cpu : *per_cpu) {
      held += static_cast<int64_t>(cpu.callers[index].allocated_bytes) -
              static_cast<int64_t>(cpu.callers[index].freed_bytes);
    }
    if (index != 0 || held != 0) outstanding_[CallerName(caller)] += held;
  }
}

std::optional<absl::Status> PercpuAllocProbe::SelfTest() {
  if (!skel_) return absl::FailedPreconditionError("not attached");
  return CanaryCounted(
      bpf_map__fd(skel_->maps.events), PERCPU_EVENT_SELF_CHECK,
      fmt::format("kpathd's own per-CPU allocation ({} bytes per CPU: a per-CPU array map)",
                  PERCPU_SELF_CHECK_SIZE),
      [] {
        // One value: one per-CPU allocation of PERCPU_SELF_CHECK_SIZE bytes, made in the bpf()
        // call by this thread, freed when the map goes. It needs CAP_BPF, which kpathd keeps
        // while a BPF probe is configured.
        int fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "kpath_canary", sizeof(uint32_t),
                                PERCPU_SELF_CHECK_SIZE, 1, nullptr);
        if (fd < 0) {
          return absl::UnavailableError(
              fmt::format("could not create the canary's per-CPU array map: {}", strerror(errno)));
        }
        close(fd);
        return absl::OkStatus();
      });
}

absl::Status PercpuAllocProbe::Collect(MetricFamilies& out) {
  if (!skel_) return absl::FailedPreconditionError("probe not attached");
  if (absl::Status s = symbols_.Refresh(); !s.ok()) {
    spdlog::debug("probe {}: kallsyms refresh failed: {}", kName, std::string(s.message()));
  }
  if (absl::Status s = DrainCounters(); !s.ok()) return s;

  // Event counters are cumulative in the kernel: sum the CPUs (a failed read keeps the last).
  for (uint32_t e = 0; e < PERCPU_EVENT_MAX; ++e) {
    absl::StatusOr<uint64_t> sum = SumPerCpu(bpf_map__fd(skel_->maps.events), e, "read events");
    if (sum.ok()) events_[e] = *sum;
  }

  allocs_.AppendFamilies(percpu_metrics::kAllocsTotal, percpu_metrics::kAllocsEvictedTotal, 0, out);
  allocs_.AppendFamilies(percpu_metrics::kAllocBytesTotal, percpu_metrics::kAllocBytesEvictedTotal,
                         1, out);

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

  FamilyBuilder lost(health_metrics::kEventsLostTotal);
  lost.Add({{"probe", std::string(kName)}, {"reason", "tracking_map_full"}},
           static_cast<double>(events_[PERCPU_EVENT_LIVE_MAP_FULL] + log_not_tracked_));
  if (tracking_ == LiveAllocTracking::kLog) {
    lost.Add({{"probe", std::string(kName)}, {"reason", "log_full"}},
             static_cast<double>(events_[PERCPU_EVENT_LOG_FULL]));
  }
  lost.AppendTo(out);
  FamilyBuilder(percpu_metrics::kUntrackedFreesTotal)
      .Add(static_cast<double>(events_[PERCPU_EVENT_UNTRACKED_FREE] + log_untracked_frees_))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
