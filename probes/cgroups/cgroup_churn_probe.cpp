#include "probes/cgroups/cgroup_churn_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "cgroup_churn.skel.h"
#include "fmt/format.h"
#include "probes/cgroups/cgroup_churn.h"
#include "probes/cgroups/cgroups_metrics.h"
#include "probes/collect/bpf_maps.h"
#include "probes/collect/label_values.h"
#include "probes/kernel/systemd_unit.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

// Both tracepoints are attached, through the same mechanism.
std::string PlanTarget() {
  return fmt::format("{}:{}/{}", CgroupChurnProbe::kCategory, CgroupChurnProbe::kMkdirEvent,
                     CgroupChurnProbe::kRmdirEvent);
}

// A series exists for each (comm, unit) that made or removed a cgroup; each family shows only
// the ones that did its kind (a process that only creates has no rmdir series). `series` is the
// counters' series() or, for the *_evicted_total families, their evicted().
void AppendNonZero(const std::map<std::vector<std::string>, std::vector<uint64_t>>& series,
                   const MetricSpec& spec, size_t field, MetricFamilies& out) {
  FamilyBuilder family(spec);
  for (const auto& [labels, values] : series) {
    if (values[field] == 0) continue;
    family.Add({{"comm", labels[0]}, {"unit", labels[1]}}, static_cast<double>(values[field]));
  }
  family.AppendTo(out);
}

}  // namespace

std::string CgroupChurnUnit(const cgroup_churn_path& path) {
  std::string_view tail(path.tail, strnlen(path.tail, sizeof(path.tail)));
  return SanitizeLabelValue(SystemdUnitOfPathTail(tail, path.truncated != 0));
}

namespace {
std::string CommOf(const cgroup_churn_key& key) {
  return SanitizeLabelValue(std::string_view(key.comm, strnlen(key.comm, sizeof(key.comm))));
}
}  // namespace

std::vector<std::string> CgroupChurnLabels(const cgroup_churn_key& key,
                                           const cgroup_churn_path& path) {
  return {CommOf(key), CgroupChurnUnit(path)};
}

std::string CgroupChurnStatus(std::optional<double> per_second, std::string_view top_unit) {
  if (!per_second) return {};
  double rate = std::max(*per_second, 0.0);
  std::string text = rate < 9.95 ? fmt::format("cgroup churn {:.1f}/s", rate)
                                 : fmt::format("cgroup churn {:.0f}/s", rate);
  if (text.ends_with(".0/s")) text.replace(text.size() - 4, 2, "");
  if (rate > 0 && !top_unit.empty()) text += fmt::format(" (top unit {})", top_unit);
  return text;
}

CgroupChurnProbe::CgroupChurnProbe(KernelFeatures& kernel, CgroupChurnOptions options, Clock clock)
    : BpfProbe(kName, kernel, options.allowed),
      options_(std::move(options)),
      clock_(std::move(clock)),
      churn_({"comm", "unit"},
             {static_cast<size_t>(options_.labels.comm), static_cast<size_t>(options_.labels.unit)},
             2),
      mkdir_rate_(options_.churn_window) {
  if (!clock_) clock_ = absl::Now;
}

CgroupChurnProbe::~CgroupChurnProbe() { Detach(); }

void CgroupChurnProbe::SetLabelLimits(const LabelLimits& limits) {
  options_.labels = limits;
  churn_.SetTopN({static_cast<size_t>(limits.comm), static_cast<size_t>(limits.unit)});
}

std::vector<AttachPlan> CgroupChurnProbe::Plans() const {
  // fentry/kprobe on cgroup_mkdir()/cgroup_rmdir() are not offered: every kernel that has them
  // (fentry 5.5+, any kprobe-enabled kernel kpathd serves) has these tracepoints (4.19+ with the
  // path argument), and those functions see only a kernfs node, whose layout changed in 6.15.
  return PlansFor(kMechanisms, kDefaultMechanisms,
                  [](Mechanism) { return std::vector<std::string>{PlanTarget()}; });
}

std::optional<int> CgroupChurnProbe::EventArity(std::string_view event) const {
  const TracepointArity& arity = kernel_.Layout().Tracepoints();
  return event == kMkdirEvent ? arity.cgroup_mkdir : arity.cgroup_rmdir;
}

absl::Status CgroupChurnProbe::Supported(const AttachPlan& plan) {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      if (!kernel_.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      for (std::string_view event : {kMkdirEvent, kRmdirEvent}) {
        std::optional<int> args = EventArity(event);
        if (!args) {
          return absl::NotFoundError(fmt::format("tracepoint not in BTF (btf_trace_{})", event));
        }
        if (!TracepointArity::CgroupHasPath(args)) {
          return absl::UnavailableError(
              fmt::format("{} has no path argument (kernel before 4.19)", event));
        }
      }
      return absl::OkStatus();
    case Mechanism::kRawTp:
      for (std::string_view event : {kMkdirEvent, kRmdirEvent}) {
        if (!kernel_.TracepointExists(kCategory, event))
          return absl::NotFoundError(fmt::format("kernel has no tracepoint {}", event));
        // Without BTF the arity is unknown; attaching fails if the path argument is missing.
        if (std::optional<int> args = EventArity(event);
            args && !TracepointArity::CgroupHasPath(args)) {
          return absl::UnavailableError(
              fmt::format("{} has no path argument (kernel before 4.19)", event));
        }
      }
      return absl::OkStatus();
    case Mechanism::kTracepoint:
      for (std::string_view event : {kMkdirEvent, kRmdirEvent}) {
        absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, event);
        if (!format.ok()) return format.status();
        if (!format->Find("path"))
          return absl::NotFoundError(fmt::format("{} format has no path field", event));
      }
      return absl::OkStatus();
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

CgroupChurnProbe::DirectReads CgroupChurnProbe::DirectReadsFor(const AttachPlan& plan) {
  DirectReads reads;
  if (!kernel_.HasVmlinuxBtf()) return reads;
  reads.task_comm = kernel_.Layout().Task().comm.value_or(0);
  if (plan.mechanism != Mechanism::kTpBtf) return reads;  // only tp_btf has the cgroup as BTF
  if (const CgroupLayout& cgroup = kernel_.Layout().Cgroup(); cgroup.complete()) {
    reads.cgroup_kn = *cgroup.cgroup_kn;
    reads.kn_hash = *cgroup.kernfs_node_hash;
    reads.cgroup_parent = *cgroup.cgroup_parent;
    reads.css_serial = *cgroup.css_serial_nr;
  }
  return reads;
}

absl::Status CgroupChurnProbe::Attach(const AttachPlan& plan) {
  Detach();
  DirectReads reads = DirectReadsFor(plan);
  bool load_failed = false;
  absl::Status attached = AttachWith(plan, reads, load_failed);
  if (attached.ok() || !load_failed || reads.task_comm == 0) return attached;
  // Reads from the task and the cgroup need bpf_get_current_task_btf (5.11+) and a verifier that
  // follows BTF pointers: without them, the helpers and the path.
  spdlog::debug("probe {}: {}; trying without reads from kernel structures", kName,
                std::string(attached.message()));
  return AttachWith(plan, DirectReads{}, load_failed);
}

absl::Status CgroupChurnProbe::AttachWith(const AttachPlan& plan, const DirectReads& reads,
                                          bool& load_failed) {
  load_failed = false;
  OwnedSkeleton<cgroup_churn_bpf> skel(cgroup_churn_bpf__open(), cgroup_churn_bpf__destroy);
  if (!skel) return LibbpfError("open", errno);

  bpf_program* mkdir_prog = nullptr;
  bpf_program* rmdir_prog = nullptr;
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      mkdir_prog = skel->progs.cgroup_mkdir_tp_btf;
      rmdir_prog = skel->progs.cgroup_rmdir_tp_btf;
      break;
    case Mechanism::kRawTp:
      mkdir_prog = skel->progs.cgroup_mkdir_raw_tp;
      rmdir_prog = skel->progs.cgroup_rmdir_raw_tp;
      break;
    case Mechanism::kTracepoint: {
      for (std::string_view event : {kMkdirEvent, kRmdirEvent}) {
        absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, event);
        if (!format.ok()) return format.status();
        const TracepointField* path = format->Find("path");
        if (!path) return absl::NotFoundError(fmt::format("{} format has no path field", event));
        if (path->type.find("__data_loc") == std::string::npos) {
          return absl::UnavailableError(
              fmt::format("{} path field is \"{}\", not a __data_loc string", event, path->type));
        }
        (event == kMkdirEvent ? skel->rodata->tp_mkdir_path_offset
                              : skel->rodata->tp_rmdir_path_offset) = path->offset;
      }
      mkdir_prog = skel->progs.cgroup_mkdir_tracepoint;
      rmdir_prog = skel->progs.cgroup_rmdir_tracepoint;
      break;
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }

  EnableOnly(skel->obj, {mkdir_prog, rmdir_prog});
  skel->rodata->task_comm_offset = reads.task_comm;
  skel->rodata->cgroup_kn_offset = reads.cgroup_kn;
  skel->rodata->kn_hash_offset = reads.kn_hash;
  skel->rodata->cgroup_parent_offset = reads.cgroup_parent;
  skel->rodata->css_serial_offset = reads.css_serial;
  if (int err = cgroup_churn_bpf__load(skel.get()); err) {
    load_failed = true;
    return LibbpfError("load", err);
  }

  absl::StatusOr<KeyedCounterMaps> counts = KeyedCounterMaps::Find(skel->obj, "churn_counts");
  if (!counts.ok()) return counts.status();
  if (absl::Status s = AttachAndRemember({mkdir_prog, rmdir_prog}, plan); !s.ok()) return s;
  ListPrograms({mkdir_prog, rmdir_prog});
  paths_fd_[0] = bpf_map__fd(skel->maps.churn_paths_0);
  paths_fd_[1] = bpf_map__fd(skel->maps.churn_paths_1);
  key_source_ = reads.cgroup_kn != 0 ? "parent serial and kernfs name hash" : "path tail hash";
  units_.clear();
  counts_ = *std::move(counts);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

void CgroupChurnProbe::Detach() {
  BpfProbe::Detach();
  skel_.reset();
  counts_.reset();
  paths_fd_[0] = paths_fd_[1] = -1;
}

const std::string* CgroupChurnProbe::UnitOf(uint64_t path_key, uint32_t buffer) {
  // The path sent with this interval's counts, else the last one known for the key.
  cgroup_churn_path path;
  if (bpf_map_lookup_elem(paths_fd_[buffer & 1], &path_key, &path) == 0) {
    // Bounded: transient cgroups bring new keys without end; live ones are sent again.
    if (units_.size() >= 65536) units_.clear();
    std::string& unit = units_[path_key];
    unit = CgroupChurnUnit(path);
    return &unit;
  }
  auto it = units_.find(path_key);
  return it != units_.end() ? &it->second : nullptr;
}

void CgroupChurnProbe::EmptyPaths(uint32_t buffer) {
  // Keys first: deleting while iterating with get_next_key restarts the walk.
  int fd = paths_fd_[buffer & 1];
  std::vector<uint64_t> keys;
  uint64_t key = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &key) == 0) {
    keys.push_back(key);
    prev = &keys.back();
  }
  for (uint64_t k : keys) bpf_map_delete_elem(fd, &k);
}

absl::Status CgroupChurnProbe::Collect(MetricFamilies& out) {
  if (!skel_ || !counts_) return absl::FailedPreconditionError("probe not attached");
  absl::Status drained = counts_->Drain([&](const void* key, std::span<const uint64_t> sums) {
    if (!key) {
      // The hash was full this interval: counted, without labels.
      churn_.AddOther(sums);
      for (uint64_t n : sums) unlabelled_ += n;
      return;
    }
    const auto* k = static_cast<const cgroup_churn_key*>(key);
    if (const std::string* unit = UnitOf(k->path_key, counts_->last_drained())) {
      churn_.Add({CommOf(*k), *unit}, sums);
      return;
    }
    // The tail never reached user space (its map was full): counted, without the unit.
    churn_.Add({CommOf(*k), std::string(FoldedCounters::kOther)}, sums);
    for (uint64_t n : sums) unlabelled_ += n;
  });
  if (drained.ok()) EmptyPaths(counts_->last_drained());
  // A failed drain leaves the counts in the kernel for the next one; the interval still ends.
  churn_.EndInterval();
  if (!drained.ok()) return drained;

  mkdir_rate_.Add(clock_(), static_cast<double>(churn_.total(0)));
  std::optional<double> per_second = mkdir_rate_.PerSecond();
  status_ = CgroupChurnStatus(per_second, churn_.TopValue(1));

  AppendNonZero(churn_.series(), cgroups_metrics::kCgroupMkdirTotal, 0, out);
  AppendNonZero(churn_.evicted(), cgroups_metrics::kCgroupMkdirEvictedTotal, 0, out);
  AppendNonZero(churn_.series(), cgroups_metrics::kCgroupRmdirTotal, 1, out);
  AppendNonZero(churn_.evicted(), cgroups_metrics::kCgroupRmdirEvictedTotal, 1, out);
  if (per_second) {
    FamilyBuilder(cgroups_metrics::kCgroupChurnPerSecond).Add(*per_second).AppendTo(out);
  }
  FamilyBuilder(cgroups_metrics::kCgroupChurnUnlabelledTotal)
      .Add(static_cast<double>(unlabelled_))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
