#include "probes/hooks/foreign_hook_inventory.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <tuple>

#include "fmt/format.h"
#include "probes/collect/bpf_program_stats.h"
#include "probes/hooks/hooks_metrics.h"
#include "probes/kernel/text.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

// Tracefs and debugfs files are small; the bound keeps a hostile or garbled one cheap.
constexpr size_t kMaxTracefsFileBytes = 16 << 20;
// A uprobe's binary path can be long; labels stay readable and bounded.
constexpr size_t kMaxTargetLength = 160;
// Ticks land a little early or late on the refresh boundary; do not skip a whole interval.
constexpr auto kRefreshSlack = std::chrono::milliseconds(250);
// While the set of BPF objects is unchanged, the owners found by the last /proc scan are reused,
// for at most this many refreshes: the scan costs ~60 us per process (3000 processes: 0.18 s).
// A rescan still catches what an unchanged set can hide: an old program newly attached through
// a perf event, or an fd handed to another process.
constexpr int kRefreshesPerFullScan = 4;

// The sources, in the order the gauge lists them.
constexpr std::string_view kSourceKprobesList = "kprobes_list";
constexpr std::string_view kSourceKprobeEvents = "kprobe_events";
constexpr std::string_view kSourceUprobeEvents = "uprobe_events";
constexpr std::string_view kSourceDynamicEvents = "dynamic_events";
constexpr std::string_view kSourceEnabledFunctions = "enabled_functions";
constexpr std::string_view kSourceBpf = "bpf";

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

std::string BoundedTarget(const std::string& target) {
  if (target.size() <= kMaxTargetLength) return target;
  // Keep the end: for a binary path and offset, the file name and offset say the most.
  return "..." + target.substr(target.size() - (kMaxTargetLength - 3));
}

// kpathd's pid as the procfs at <procfs> numbers it (differs from getpid() in a container that
// mounts the host's procfs).
std::optional<pid_t> OwnPidInProcfs(const HostPaths& paths) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink(paths.Proc("self"), ec);
  if (ec) return std::nullopt;
  // Pids stay below 2^22 (PID_MAX_LIMIT).
  std::optional<uint64_t> pid = text::ParseDecimal(self.filename().string());
  if (!pid || *pid > (uint64_t{1} << 22)) return std::nullopt;
  return static_cast<pid_t>(*pid);
}

}  // namespace

ForeignHookInventory::ForeignHookInventory(HostPaths paths, KernelFeatures& kernel,
                                           ForeignHookOptions options)
    : paths_(paths),
      kernel_(kernel),
      options_(std::move(options)),
      hot_(options_.config.hot_functions),
      debugfs_(paths, options_.may_mount),
      btf_names_(paths),
      cost_({"owner", "program", "sampled"},
            {static_cast<size_t>(options_.labels.comm),
             static_cast<size_t>(options_.config.top_programs), 2},
            2) {}

ForeignHookInventory::~ForeignHookInventory() { Stop(); }

absl::Status ForeignHookInventory::Start() {
  own_pid_ = ::getpid();
  if (!options_.bpf_inventory) {
    spdlog::info(
        "foreign hooks: bpf.enabled is false: BPF programs and links are not listed, "
        "only kprobes and tracefs events");
    return absl::OkStatus();
  }
  switch (options_.config.bpf_stats) {
    case BpfStatsMode::kOff:
      spdlog::info(
          "foreign hooks: hooks.bpf_stats is off: foreign BPF cost is reported only "
          "while the sysctl kernel.bpf_stats_enabled is on");
      break;
    case BpfStatsMode::kAlways: {
      int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
      if (fd < 0) {
        spdlog::warn(
            "foreign hooks: BPF_ENABLE_STATS: {}; foreign BPF cost is reported only "
            "while the sysctl kernel.bpf_stats_enabled is on",
            std::strerror(errno));
      } else {
        stats_fd_ = fd;
        NoteBpfStatsHeldByKpathd(true);
        spdlog::info(
            "foreign hooks: holding BPF run-time statistics on (hooks.bpf_stats: "
            "always; about 20 ns per run of every BPF program)");
      }
      break;
    }
    case BpfStatsMode::kSampled:
      sampler_ = std::make_unique<BpfStatsSampler>(paths_, options_.config.refresh_interval,
                                                   options_.config.bpf_stats_slice);
      sampler_->Start();
      spdlog::info(
          "foreign hooks: BPF run-time statistics held on for {} of every {} "
          "(hooks.bpf_stats: sampled), figures scaled",
          absl::FormatDuration(options_.config.bpf_stats_slice),
          absl::FormatDuration(options_.config.refresh_interval));
      break;
  }
  return absl::OkStatus();
}

void ForeignHookInventory::Stop() {
  if (sampler_) sampler_->Stop();
  if (stats_fd_ >= 0) {
    ::close(stats_fd_);
    stats_fd_ = -1;
    NoteBpfStatsHeldByKpathd(false);
  }
}

void ForeignHookInventory::SetLabelLimits(const LabelLimits& limits) {
  options_.labels = limits;
  cost_.SetTopN(
      {static_cast<size_t>(limits.comm), static_cast<size_t>(options_.config.top_programs), 2});
}

void ForeignHookInventory::LogOnce(std::string_view key, const std::string& message) {
  auto [it, inserted] = logged_.emplace(std::string(key), true);
  if (inserted) spdlog::info("foreign hooks: {}", message);
}

absl::Status ForeignHookInventory::Collect(MetricFamilies& out) {
  auto now = std::chrono::steady_clock::now();
  if (!refreshed_ || now + kRefreshSlack >= next_refresh_) {
    Refresh();
    refreshed_ = true;
    next_refresh_ = now + ToChrono(options_.config.refresh_interval);
  }
  AppendFamilies(out);
  return absl::OkStatus();
}

TracingSources ForeignHookInventory::ReadTracing() {
  TracingSources tracing;
  // kprobes/list and the global switch (debugfs).
  kprobes_enabled_.reset();
  source_available_[std::string(kSourceKprobesList)] = false;
  if (std::optional<std::filesystem::path> kprobes = debugfs_.KprobesDir()) {
    absl::StatusOr<std::string> text = ReadFileToString(*kprobes / "list", kMaxTracefsFileBytes);
    absl::StatusOr<KprobeList> list =
        text.ok() ? ParseKprobeList(*text) : absl::StatusOr<KprobeList>(text.status());
    if (list.ok()) {
      tracing.kprobe_list = *std::move(list);
      source_available_[std::string(kSourceKprobesList)] = true;
    } else {
      LogOnce("kprobes_list_error", std::string(list.status().message()));
    }
    if (absl::StatusOr<std::string> enabled = ReadFileToString(*kprobes / "enabled", 64);
        enabled.ok()) {
      if (absl::StatusOr<bool> on = ParseKprobesEnabled(*enabled); on.ok()) kprobes_enabled_ = *on;
    }
  }

  // tracefs dynamic events and ftrace users.
  absl::StatusOr<std::filesystem::path> tracefs = kernel_.Tracefs();
  std::set<std::tuple<std::string, std::string, std::string, uint64_t>> seen_events;
  for (std::string_view source : {kSourceDynamicEvents, kSourceKprobeEvents, kSourceUprobeEvents}) {
    source_available_[std::string(source)] = false;
    if (!tracefs.ok()) continue;
    std::filesystem::path path = *tracefs / std::string(source);
    if (!PathExists(path)) continue;  // the kernel lacks this kind of event
    absl::StatusOr<std::string> text = ReadFileToString(path, kMaxTracefsFileBytes);
    if (!text.ok()) {
      LogOnce(std::string(source) + "_error", std::string(text.status().message()));
      continue;
    }
    source_available_[std::string(source)] = true;
    // dynamic_events repeats the other two: each event is taken once.
    for (ProbeEvent& event : ParseProbeEvents(*text).events) {
      if (seen_events.emplace(event.group, event.event, event.target, event.offset).second) {
        tracing.probe_events.push_back(std::move(event));
      }
    }
  }
  source_available_[std::string(kSourceEnabledFunctions)] = false;
  if (tracefs.ok() && PathExists(*tracefs / "enabled_functions")) {
    absl::StatusOr<std::string> text =
        ReadFileToString(*tracefs / "enabled_functions", kMaxTracefsFileBytes);
    if (text.ok()) {
      tracing.enabled_functions = ParseEnabledFunctions(*text);
      source_available_[std::string(kSourceEnabledFunctions)] = true;
    } else {
      LogOnce("enabled_functions",
              fmt::format("ftrace users not listed: {}", std::string(text.status().message())));
    }
  } else if (!tracefs.ok()) {
    LogOnce("tracefs", fmt::format("no tracefs, so no kprobe/uprobe events or ftrace users: {}",
                                   std::string(tracefs.status().message())));
  }

  if (!tracing.kprobe_list) {
    bool kprobe_events = source_available_[std::string(kSourceKprobeEvents)];
    bool kprobe_pmu = PathExists(paths_.Sys("bus/event_source/devices/kprobe/type"));
    if (!kprobe_events && !kprobe_pmu) {
      LogOnce("no_kprobes",
              fmt::format("this kernel has no kprobes ({}; no kprobe_events in tracefs; no "
                          "kprobe perf event source): kpath_hidden_kprobes is 0",
                          debugfs_.problem()));
    } else {
      LogOnce("no_kprobes_list",
              fmt::format("{}: kpath_hidden_kprobes counts tracefs kprobe events and BPF kprobes "
                          "only, not kernel modules' kprobes",
                          debugfs_.problem()));
    }
  }
  return tracing;
}

std::optional<BpfSources> ForeignHookInventory::ReadBpf() {
  source_available_[std::string(kSourceBpf)] = false;
  absl::StatusOr<std::vector<BpfProgramInfo>> programs = ListBpfPrograms();
  if (!programs.ok()) {
    LogOnce("bpf", fmt::format("BPF programs and links not listed: {} (needs CAP_SYS_ADMIN)",
                               std::string(programs.status().message())));
    return std::nullopt;
  }
  BpfSources bpf;
  bpf.programs = *std::move(programs);
  if (absl::StatusOr<std::vector<BpfLinkInfo>> links = ListBpfLinks(); links.ok()) {
    bpf.links = *std::move(links);
  } else {
    LogOnce("bpf_links",
            fmt::format("BPF links not listed: {}", std::string(links.status().message())));
  }
  source_available_[std::string(kSourceBpf)] = true;

  BpfHolderScan own_scan;
  own_scan.only = "self";
  own_scan.self_pid = own_pid_;
  bpf.own = ScanBpfHolders(paths_, own_scan, QueryTaskFd);
  // The /proc scan is the expensive part: skip it when every BPF object is kpathd's.
  std::set<uint32_t> own_programs;
  auto add_own_programs = [&] {
    for (const auto& [id, pid] : bpf.own.programs) own_programs.insert(id);
    for (const FdAttachment& attachment : bpf.own.attachments) {
      own_programs.insert(attachment.query.prog_id);
    }
    for (const BpfLinkInfo& link : bpf.links) {
      if (bpf.own.links.contains(link.id)) own_programs.insert(link.prog_id);
    }
  };
  add_own_programs();
  bool foreign = std::any_of(bpf.programs.begin(), bpf.programs.end(),
                             [&](const BpfProgramInfo& p) { return !own_programs.contains(p.id); });
  processes_scanned_ = 0;
  if (foreign) {
    std::vector<uint32_t> objects;
    for (const BpfProgramInfo& p : bpf.programs) objects.push_back(p.id);
    objects.push_back(0);  // programs | links
    for (const BpfLinkInfo& l : bpf.links) objects.push_back(l.id);
    bool holders_alive = std::all_of(
        scanned_holders_.processes.begin(), scanned_holders_.processes.end(),
        [&](const auto& entry) { return PathExists(paths_.Proc(std::to_string(entry.first))); });
    if (objects == scanned_objects_ && holders_alive &&
        ++refreshes_since_scan_ < kRefreshesPerFullScan) {
      bpf.foreign = scanned_holders_;
    } else {
      BpfHolderScan all;
      all.skip_pid = OwnPidInProcfs(paths_);
      bpf.foreign = ScanBpfHolders(paths_, all, QueryTaskFd);
      processes_scanned_ = bpf.foreign.processes_scanned;
      scanned_objects_ = std::move(objects);
      scanned_holders_ = bpf.foreign;
      refreshes_since_scan_ = 0;
    }
    // Another kpathd process of this executable (diagnose beside the service) is kpathd too.
    MoveSameExecutableHolders(paths_, bpf.foreign, bpf.own);
    add_own_programs();
  }

  std::set<std::pair<uint32_t, uint32_t>> wanted;
  for (const BpfProgramInfo& program : bpf.programs) {
    if (program.attach_btf_id != 0 && !own_programs.contains(program.id)) {
      wanted.insert({program.attach_btf_obj_id, program.attach_btf_id});
    }
  }
  for (const BpfLinkInfo& link : bpf.links) {
    if (link.target_btf_id != 0 && !own_programs.contains(link.prog_id)) {
      wanted.insert({link.target_obj_id, link.target_btf_id});
    }
  }
  btf_names_.Resolve(wanted);
  bpf.btf_names = btf_names_.names();
  return bpf;
}

std::string ForeignHookInventory::QualifyTracepoint(std::string_view event) {
  auto it = tracepoint_categories_.find(event);
  if (it == tracepoint_categories_.end() && categories_built_at_ != refreshes_) {
    // Built on first need, rebuilt at most once a refresh (a module may add tracepoints).
    categories_built_at_ = refreshes_;
    tracepoint_categories_.clear();
    absl::StatusOr<std::filesystem::path> tracefs = kernel_.Tracefs();
    if (tracefs.ok()) tracepoint_categories_ = QualifiedTracepointNames(*tracefs);
    it = tracepoint_categories_.find(event);
  }
  return it == tracepoint_categories_.end() ? std::string(event) : it->second;
}

void ForeignHookInventory::Refresh() {
  ++refreshes_;
  TracingSources tracing = ReadTracing();
  std::optional<BpfSources> bpf;
  if (options_.bpf_inventory) bpf = ReadBpf();
  InventoryContext context;
  context.own_pid = own_pid_;
  context.hot = &hot_;
  context.qualify_tracepoint = [this](std::string_view event) { return QualifyTracepoint(event); };
  inventory_ = BuildHookInventory(tracing, bpf ? &*bpf : nullptr, context);
  fingerprint_ = FingerprintHookSet(inventory_.hooks);
  std::set<HookIdentity> identities = HookIdentities(inventory_.hooks);
  if (events_) {
    for (Event& event : HookSetEvents(identities_, identities, refreshes_ == 1, absl::Now())) {
      events_->Emit(std::move(event));
    }
  }
  identities_ = std::move(identities);
  AccountCost();

  size_t hot = std::count_if(inventory_.hooks.begin(), inventory_.hooks.end(),
                             [](const ForeignHook& h) { return h.hot; });
  status_ = fmt::format("{} foreign hooks ({} hot)", inventory_.hooks.size(), hot);
  if (inventory_.hidden_kprobes > 0) {
    status_ += fmt::format(", {} hidden kprobes", inventory_.hidden_kprobes);
  }
}

void ForeignHookInventory::AccountCost() {
  const bool exact = options_.bpf_inventory && BpfRunStatsComplete(paths_);
  std::map<uint32_t, BpfStatsSampler::Reading> current;
  for (const ForeignProgram& program : inventory_.programs) {
    current[program.id] = {program.run_time_ns, program.run_count};
    program_labels_[program.id] = {program.owner, program.program};
    if (!exact) continue;
    uint64_t ns = program.run_time_ns, runs = program.run_count;
    if (auto it = last_run_.find(program.id); it != last_run_.end()) {
      // A program's counters only grow; anything else is a new program under a reused id.
      if (ns >= it->second.run_time_ns && runs >= it->second.run_count) {
        ns -= it->second.run_time_ns;
        runs -= it->second.run_count;
      }
    }
    if (ns != 0 || runs != 0) {
      const uint64_t deltas[] = {ns, runs};
      cost_.Add({program.owner, program.program, "false"}, deltas);
    }
  }
  if (sampler_) {
    std::map<uint32_t, BpfStatsSampler::Estimate> estimates = sampler_->Take();
    if (!exact) {
      for (const auto& [id, estimate] : estimates) {
        auto labels = program_labels_.find(id);
        if (labels == program_labels_.end()) {
          // kpathd's own (priced by CollectorSet as kpath_bpf_program_run_seconds_total), or a
          // program never seen in an inventory (dropped there).
          AddSampledBpfRunEstimate(id, {estimate.run_time_ns, estimate.run_count});
          continue;
        }
        const uint64_t deltas[] = {static_cast<uint64_t>(std::llround(estimate.run_time_ns)),
                                   static_cast<uint64_t>(std::llround(estimate.run_count))};
        if (deltas[0] != 0 || deltas[1] != 0) {
          cost_.Add({labels->second.first, labels->second.second, "true"}, deltas);
        }
      }
    }
    if (std::string error = sampler_->LastError(); !error.empty()) {
      LogOnce("sampler", fmt::format("sampled BPF statistics unavailable: {}", error));
    }
  }
  // Forget programs that are gone (their ids are not reused soon, but the map must stay bounded).
  for (auto it = program_labels_.begin(); it != program_labels_.end();) {
    it = current.contains(it->first) ? std::next(it) : program_labels_.erase(it);
  }
  last_run_ = std::move(current);
  cost_.EndInterval();
  if (exact) {
    stats_fraction_ = 1;
  } else if (sampler_) {
    stats_fraction_ = std::min(
        1.0, absl::FDivDuration(options_.config.bpf_stats_slice, options_.config.refresh_interval));
  } else {
    stats_fraction_ = 0;
  }
}

void ForeignHookInventory::AppendFamilies(MetricFamilies& out) const {
  FamilyBuilder(hooks_metrics::kHiddenKprobes)
      .Add(static_cast<double>(inventory_.hidden_kprobes))
      .AppendTo(out);
  FamilyBuilder(hooks_metrics::kHiddenKprobesDisabled)
      .Add(static_cast<double>(inventory_.hidden_kprobes_disabled))
      .AppendTo(out);
  if (kprobes_enabled_) {
    FamilyBuilder(hooks_metrics::kKprobesEnabled).Add(*kprobes_enabled_ ? 1 : 0).AppendTo(out);
  }

  std::map<std::pair<std::string, bool>, uint64_t> by_kind;
  for (std::string_view kind : HookKinds()) {
    by_kind[{std::string(kind), false}] = 0;
    by_kind[{std::string(kind), true}] = 0;
  }
  // kind, target, owner, unit, hot -> hooks (an _info series is 1 whatever the count: issue 19)
  using InfoKey = std::tuple<std::string, std::string, std::string, std::string, bool>;
  std::map<InfoKey, uint64_t> info;
  for (const ForeignHook& hook : inventory_.hooks) {
    ++by_kind[{hook.kind, hook.hot}];
    ++info[{hook.kind, BoundedTarget(hook.target), hook.owner, hook.unit, hook.hot}];
  }
  FamilyBuilder hooks(hooks_metrics::kForeignHooks);
  for (const auto& [key, count] : by_kind) {
    hooks.Add({{"kind", key.first}, {"hot", key.second ? "true" : "false"}},
              static_cast<double>(count));
  }
  hooks.AppendTo(out);

  // Hot hooks first, so that a bounded list never hides them.
  std::vector<std::pair<InfoKey, uint64_t>> ordered(info.begin(), info.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    return std::get<4>(a.first) > std::get<4>(b.first);
  });
  FamilyBuilder details(hooks_metrics::kForeignHookInfo);
  uint64_t omitted = 0;
  size_t series = 0;
  for (const auto& [key, count] : ordered) {
    if (series >= static_cast<size_t>(options_.config.max_info_series)) {
      omitted += count;
      continue;
    }
    ++series;
    const auto& [kind, target, owner, unit, hot] = key;
    details.Add({{"kind", kind},
                 {"target", target},
                 {"owner", owner},
                 {"unit", unit},
                 {"hot", hot ? "true" : "false"}},
                1);
  }
  details.AppendTo(out);
  // One series whatever the set: every hook, the omitted ones too.
  FamilyBuilder(hooks_metrics::kForeignHookSetInfo)
      .Add({{"fingerprint", fingerprint_.Hex()}, {"hooks", std::to_string(fingerprint_.hooks)}}, 1)
      .AppendTo(out);
  FamilyBuilder(hooks_metrics::kForeignHookInfoOmitted)
      .Add(static_cast<double>(omitted))
      .AppendTo(out);

  // The live series, then the ended ones (their totals, never added to "other": issue 19, D1).
  auto append_cost = [&](const auto& series, const MetricSpec& seconds_spec,
                         const MetricSpec& runs_spec) {
    FamilyBuilder seconds(seconds_spec);
    FamilyBuilder runs(runs_spec);
    for (const auto& [labels, values] : series) {
      LabelPairs pairs{{"owner", labels[0]}, {"program", labels[1]}, {"sampled", labels[2]}};
      seconds.Add(pairs, static_cast<double>(values[0]) / 1e9);
      runs.Add(pairs, static_cast<double>(values[1]));
    }
    seconds.AppendTo(out);
    runs.AppendTo(out);
  };
  append_cost(cost_.series(), hooks_metrics::kForeignBpfRunSecondsTotal,
              hooks_metrics::kForeignBpfRunsTotal);
  append_cost(cost_.evicted(), hooks_metrics::kForeignBpfRunSecondsEvictedTotal,
              hooks_metrics::kForeignBpfRunsEvictedTotal);
  FamilyBuilder(hooks_metrics::kForeignBpfStatsCoverageRatio).Add(stats_fraction_).AppendTo(out);

  FamilyBuilder sources(hooks_metrics::kForeignHookSourceAvailable);
  for (std::string_view source : {kSourceKprobesList, kSourceKprobeEvents, kSourceUprobeEvents,
                                  kSourceDynamicEvents, kSourceEnabledFunctions, kSourceBpf}) {
    auto it = source_available_.find(std::string(source));
    sources.Add({{"source", std::string(source)}},
                it != source_available_.end() && it->second ? 1 : 0);
  }
  sources.AppendTo(out);
  FamilyBuilder(hooks_metrics::kForeignHookProcessesScanned)
      .Add(static_cast<double>(processes_scanned_))
      .AppendTo(out);
}

}  // namespace kpath
