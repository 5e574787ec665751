#include "probes/cgroups/cgroup_churn_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cgroup_churn.legacy.skel.h"
#include "cgroup_churn.skel.h"
#include "fmt/format.h"
#include "probes/cgroups/cgroup_churn.h"
#include "probes/cgroups/cgroup_files.h"
#include "probes/cgroups/cgroups_metrics.h"
#include "probes/collect/bpf_maps.h"
#include "probes/collect/bpf_skeleton.h"
#include "probes/collect/label_values.h"
#include "probes/kernel/host_paths.h"
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
                   const std::vector<std::string>& names, const MetricSpec& spec, size_t field,
                   MetricFamilies& out) {
  FamilyBuilder family(spec);
  for (const auto& [labels, values] : series) {
    if (values[field] == 0) continue;
    LabelPairs pairs;
    // An empty value is an absent label: a cgroup outside any pod has no pod labels.
    for (size_t i = 0; i < names.size() && i < labels.size(); ++i) {
      if (!labels[i].empty()) pairs.emplace_back(names[i], labels[i]);
    }
    family.Add(pairs, static_cast<double>(values[field]));
  }
  family.AppendTo(out);
}

std::vector<std::string> LabelNames(bool pods) { return WithPodLabelNames({"comm", "unit"}, pods); }

}  // namespace

std::string CgroupChurnUnit(const cgroup_churn_path& path) {
  std::string_view tail(path.tail, strnlen(path.tail, sizeof(path.tail)));
  return SanitizeLabelValue(SystemdUnitOfPathTail(tail, path.truncated != 0));
}

std::optional<KubepodsCgroup> CgroupChurnPod(const cgroup_churn_path& path) {
  return ParseKubepodsCgroupTail(std::string_view(path.tail, strnlen(path.tail, sizeof(path.tail))),
                                 path.truncated != 0);
}

bool CgroupChurnShapeFoldsAlike(const cgroup_churn_path& path, bool pod_labels) {
  const std::string unit = CgroupChurnUnit(path);
  const std::optional<KubepodsCgroup> pod =
      pod_labels ? CgroupChurnPod(path) : std::optional<KubepodsCgroup>();
  const size_t length = strnlen(path.tail, sizeof(path.tail));
  const size_t name = std::string_view(path.tail, length).rfind('/') + 1;  // npos + 1 == 0
  bool digits = false;
  for (size_t i = name; i < length; ++i) digits |= path.tail[i] >= '0' && path.tail[i] <= '9';
  if (!digits) return false;
  // The fold reads digits by class (a run, a hex id, a UUID) or keeps them as they are: another
  // value in every digit's place shows which. A pod's uid or a container's id in the name
  // changes with them, and with it the pod labels.
  for (char digit : {'0', '1', '9'}) {
    cgroup_churn_path other = path;
    for (size_t i = name; i < length; ++i) {
      if (other.tail[i] >= '0' && other.tail[i] <= '9') other.tail[i] = digit;
    }
    if (CgroupChurnUnit(other) != unit) return false;
    if (pod_labels && CgroupChurnPod(other) != pod) return false;
  }
  return true;
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
      churn_(LabelNames(options_.pods != nullptr), TopN(options_.labels), 2),
      mkdir_rate_(options_.churn_window) {
  if (!clock_) clock_ = absl::Now;
}

CgroupChurnProbe::~CgroupChurnProbe() { Detach(); }

void CgroupChurnProbe::SetLabelLimits(const LabelLimits& limits) {
  options_.labels = limits;
  churn_.SetTopN(TopN(limits));
}

std::vector<size_t> CgroupChurnProbe::TopN(const LabelLimits& limits) const {
  return WithPodLabelTopN({static_cast<size_t>(limits.comm), static_cast<size_t>(limits.unit)},
                          limits.pod, options_.pods != nullptr);
}

std::vector<std::string> CgroupChurnProbe::SeriesLabels(const cgroup_churn_key& key,
                                                        const PathInfo* info) const {
  std::vector<std::string> labels{CommOf(key),
                                  info ? info->unit : std::string(FoldedCounters::kOther)};
  if (!options_.pods) return labels;
  const PodLabels none;
  const PodLabels& pod = info ? info->pod : none;
  AppendPodLabels(labels, pod);
  return labels;
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
  const CgroupLayout& cgroup = kernel_.Layout().Cgroup();
  if (cgroup.has_hierarchy()) {
    reads.cgroup_root = *cgroup.cgroup_root;
    reads.root_hierarchy_id = *cgroup.root_hierarchy_id;
  }
  if (plan.mechanism != Mechanism::kTpBtf) return reads;  // only tp_btf has the cgroup as BTF
  if (cgroup.complete()) {
    reads.cgroup_kn = *cgroup.cgroup_kn;
    reads.kn_hash = *cgroup.kernfs_node_hash;
    reads.kn_name = cgroup.kernfs_node_name.value_or(0);
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
  if (attached.ok() || !load_failed) return attached;
  // The task's comm needs bpf_get_current_task_btf (5.11+): without it, bpf_get_current_comm,
  // and the cgroup's reads stay (tp_btf follows the BTF pointer since 5.5, raw_tp reads with
  // bpf_probe_read_kernel): the hierarchy id is what counts a cgroup v1 unit start once
  // (Debian 11's 5.10). Only when that fails too, no reads from kernel structures at all.
  if (reads.task_comm != 0) {
    DirectReads without_task = reads;
    without_task.task_comm = 0;
    spdlog::debug("probe {}: {}; trying without reads from the task", kName,
                  std::string(attached.message()));
    attached = AttachWith(plan, without_task, load_failed);
    if (attached.ok() || !load_failed) return attached;
  }
  if (reads == DirectReads{}) return attached;
  spdlog::debug("probe {}: {}; trying without reads from kernel structures", kName,
                std::string(attached.message()));
  return AttachWith(plan, DirectReads{}, load_failed);
}

absl::Status CgroupChurnProbe::AttachWith(const AttachPlan& plan, const DirectReads& reads,
                                          bool& load_failed) {
  load_failed = false;
  OwnedSkeleton<cgroup_churn_bpf> skel =
      KPATH_OPEN_SKELETON(cgroup_churn, kernel_.HasBpfGlobalData());
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
        // The hierarchy id, an int since the field came (4.13); without it every hierarchy
        // counts.
        if (const TracepointField* root = format->Find("root"); root && root->size == 4) {
          (event == kMkdirEvent ? skel->rodata->tp_mkdir_root_offset
                                : skel->rodata->tp_rmdir_root_offset) = root->offset;
        }
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
  skel->rodata->kn_name_offset = reads.kn_name;
  skel->rodata->cgroup_parent_offset = reads.cgroup_parent;
  skel->rodata->css_serial_offset = reads.css_serial;
  skel->rodata->cgroup_root_offset = reads.cgroup_root;
  skel->rodata->root_hierarchy_id_offset = reads.root_hierarchy_id;
  if (int err = cgroup_churn_bpf__load(skel.get()); err) {
    load_failed = true;
    return LibbpfError("load", err);
  }
  if (absl::Status s = FillTunablesMap(skel->obj); !s.ok()) return s;

  absl::StatusOr<KeyedCounterMaps> counts = KeyedCounterMaps::Find(skel->obj, "churn_counts");
  if (!counts.ok()) return counts.status();
  if (absl::Status s = AttachAndRemember({mkdir_prog, rmdir_prog}, plan); !s.ok()) return s;
  ListPrograms({mkdir_prog, rmdir_prog});
  paths_fd_[0] = bpf_map__fd(skel->maps.churn_paths_0);
  paths_fd_[1] = bpf_map__fd(skel->maps.churn_paths_1);
  shapes_fd_ = bpf_map__fd(skel->maps.churn_shapes);
  key_source_ = reads.cgroup_kn == 0 ? "path tail hash, or the name's shape"
                : reads.kn_name == 0 ? "parent serial and kernfs name hash"
                                     : "parent serial and kernfs name hash, or the name's shape";
  paths_.clear();
  shapes_.clear();
  shapes_refused_.clear();
  counts_ = *std::move(counts);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

void CgroupChurnProbe::Detach() {
  BpfProbe::Detach();
  skel_.reset();
  counts_.reset();
  paths_fd_[0] = paths_fd_[1] = -1;
  shapes_fd_ = -1;
}

void CgroupChurnProbe::LearnShape(const cgroup_churn_path& path, const PathInfo& info) {
  const uint64_t shape = path.shape_key;
  if (!(shape & CGROUP_CHURN_SHAPE_BIT) || info.canary || shapes_.contains(shape) ||
      shapes_refused_.contains(shape)) {
    return;
  }
  if (!CgroupChurnShapeFoldsAlike(path, options_.pods != nullptr)) {
    if (shapes_refused_.size() >= 65536) shapes_refused_.clear();
    shapes_refused_.insert(shape);
    return;
  }
  // Bounded as paths_ is, and the programs then forget too (counts under a shape user space no
  // longer knows would lose their unit). A shape whose slot another takes goes back to being
  // counted by path key; what the programs counted under it stays known here.
  if (shapes_.size() >= 65536) {
    shapes_.clear();
    const uint64_t none = 0;
    for (uint32_t i = 0; i < CGROUP_CHURN_SHAPE_SLOTS; ++i) {
      bpf_map_update_elem(shapes_fd_, &i, &none, BPF_ANY);
    }
  }
  uint32_t slot = static_cast<uint32_t>(shape) & (CGROUP_CHURN_SHAPE_SLOTS - 1);
  if (bpf_map_update_elem(shapes_fd_, &slot, &shape, BPF_ANY) == 0) shapes_[shape] = info;
}

const CgroupChurnProbe::PathInfo* CgroupChurnProbe::PathOf(uint64_t path_key, uint32_t buffer) {
  if (path_key & CGROUP_CHURN_SHAPE_BIT) {
    auto it = shapes_.find(path_key);
    return it != shapes_.end() ? &it->second : nullptr;
  }
  // The path sent with this interval's counts, else the last one known for the key.
  cgroup_churn_path path;
  if (bpf_map_lookup_elem(paths_fd_[buffer & 1], &path_key, &path) == 0) {
    // Bounded: transient cgroups bring new keys without end; live ones are sent again.
    if (paths_.size() >= 65536) paths_.clear();
    PathInfo& info = paths_[path_key];
    info.unit = CgroupChurnUnit(path);
    if (options_.pods) {
      // Resolved once per key: its rmdir, maybe after the pod's logs are gone, keeps the names
      // its mkdir had.
      std::optional<KubepodsCgroup> cgroup = CgroupChurnPod(path);
      if (cgroup != info.cgroup || info.pod.namespace_name.empty()) {
        info.pod = cgroup ? options_.pods->OfCgroup(*cgroup) : PodLabels{};
      }
      info.cgroup = std::move(cgroup);
    }
    info.hierarchy = path.hierarchy;
    std::string_view tail(path.tail, strnlen(path.tail, sizeof(path.tail)));
    info.canary =
        !canary_name_.empty() && tail.ends_with(canary_name_) &&
        (tail.size() == canary_name_.size() || tail[tail.size() - canary_name_.size() - 1] == '/');
    LearnShape(path, info);
    return &info;
  }
  auto it = paths_.find(path_key);
  return it != paths_.end() ? &it->second : nullptr;
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

absl::Status CgroupChurnProbe::DrainCounts() {
  if (!skel_ || !counts_) return absl::FailedPreconditionError("probe not attached");
  // {comm, unit} -> hierarchy -> {mkdirs, rmdirs} of this drain. On cgroup v1 one unit start
  // makes its cgroup in every hierarchy systemd (or a container runtime) uses: counted once, as
  // the most made in any one hierarchy. Elsewhere (cgroup v2, a process making memory cgroups
  // only) there is one hierarchy and nothing changes.
  using Sums = std::array<uint64_t, 2>;
  std::map<std::vector<std::string>, std::map<uint32_t, Sums>> by_hierarchy;
  absl::Status drained = counts_->Drain([&](const void* key, std::span<const uint64_t> sums) {
    if (!key) {
      // The hash was full this interval: counted, without labels.
      churn_.AddOther(sums);
      for (uint64_t n : sums) unlabelled_ += n;
      return;
    }
    const auto* k = static_cast<const cgroup_churn_key*>(key);
    const PathInfo* info = PathOf(k->path_key, counts_->last_drained());
    if (info && info->canary) {  // kpathd's own scratch cgroup: seen, not counted
      for (size_t i = 0; i < sums.size() && i < 2; ++i) canary_counts_[i] += sums[i];
      return;
    }
    if (!info) {
      // The tail never reached user space (its map was full): counted, without the unit.
      churn_.Add(SeriesLabels(*k, nullptr), sums);
      for (uint64_t n : sums) unlabelled_ += n;
      return;
    }
    Sums& into = by_hierarchy[SeriesLabels(*k, info)][info->hierarchy];
    for (size_t i = 0; i < sums.size() && i < into.size(); ++i) into[i] += sums[i];
  });
  if (drained.ok()) EmptyPaths(counts_->last_drained());
  // Counted: the most made (removed) in any one hierarchy since the pair was first seen, so
  // that a unit start whose mkdirs fall on both sides of a drain still counts once.
  ++drains_;
  for (const auto& [labels, hierarchies] : by_hierarchy) {
    HierarchyTotals& totals = hierarchy_totals_[labels];
    totals.last_drain = drains_;
    std::array<uint64_t, 2> most = {0, 0};
    for (const auto& [hierarchy, sums] : hierarchies) {
      std::array<uint64_t, 2>& total = totals.by_hierarchy[hierarchy];
      for (size_t i = 0; i < most.size(); ++i) {
        total[i] += sums[i];
        most[i] = std::max(most[i], total[i]);
      }
    }
    std::array<uint64_t, 2> delta = {0, 0};
    for (size_t i = 0; i < most.size(); ++i) {
      delta[i] = most[i] - std::min(most[i], totals.counted[i]);
      totals.counted[i] = std::max(totals.counted[i], most[i]);
    }
    churn_.Add(labels, delta);
    unit_mkdirs_[labels[1]] += delta[0];
  }
  // Bounded: a pair quiet for kHierarchyMemory drains has every hierarchy caught up (a unit
  // start's cgroups are made within milliseconds); it starts again from zero if it comes back.
  std::erase_if(hierarchy_totals_, [&](const auto& entry) {
    return entry.second.last_drain + kHierarchyMemory < drains_;
  });
  return drained;
}

void CgroupChurnProbe::FindCanaryDirectory() {
  if (canary_looked_up_) return;
  canary_looked_up_ = true;
  // Unique to this kpathd: a tail the programs send, recognised in DrainCounts. The pid and the
  // monotonic clock's low bits, not std::random_device: getrandom() blocks until the kernel's
  // entropy pool is ready, which on a 4.19 arm64 VM without a hardware RNG (no jitter entropy
  // before 5.4) held kpathd's start for minutes after boot.
  const auto start_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  canary_name_ = fmt::format("kpathd-canary-{}-{:08x}", getpid(), static_cast<uint32_t>(start_ns));
  // kpathd's own cgroup, in the live kernel whatever --sysfs-root says: the canary is made there.
  absl::StatusOr<std::string> membership = ReadFileToString("/proc/self/cgroup");
  absl::StatusOr<std::string> mountinfo = ReadFileToString("/proc/self/mountinfo");
  absl::StatusOr<std::vector<CgroupMount>> mounts =
      mountinfo.ok() ? ParseCgroupMounts(*mountinfo) : mountinfo.status();
  std::optional<std::string> own;
  if (membership.ok() && mounts.ok()) own = OwnCgroupDirectory(*membership, *mounts);
  if (!own) {
    no_canary_why_ = "kpathd's own cgroup is not under a cgroup file system it sees";
  } else {
    // systemd owns the cgroups of its units; a unit may make cgroups under its own only when it
    // is delegated (Delegate=yes), which systemd marks with this attribute (systemd 251+).
    char value[8] = {};
    const bool delegated =
        getxattr(own->c_str(), "trusted.delegate", value, sizeof(value) - 1) == 1 ||
        getxattr(own->c_str(), "user.delegate", value, sizeof(value) - 1) == 1;
    const bool under_systemd = access("/run/systemd/system", F_OK) == 0;
    if (under_systemd && !(delegated && value[0] == '1')) {
      no_canary_why_ =
          fmt::format("systemd did not delegate kpathd's cgroup {} (Delegate=yes)", *own);
    } else {
      canary_dir_ = *own;
    }
  }
  if (!canary_dir_) spdlog::info("probe {}: no self-test: {}", kName, no_canary_why_);
}

std::optional<absl::Status> CgroupChurnProbe::SelfTest() {
  if (!skel_ || !counts_) return absl::FailedPreconditionError("not attached");
  FindCanaryDirectory();
  if (!canary_dir_) return std::nullopt;
  const std::string dir = *canary_dir_ + "/" + canary_name_;
  const uint64_t before[2] = {canary_counts_[0], canary_counts_[1]};
  if (mkdir(dir.c_str(), 0700) != 0) {
    const int err = errno;
    if (err == EROFS || err == EACCES || err == EPERM) {
      // A sandbox (the shipped unit's ProtectControlGroups=yes) or a container's read-only
      // cgroup file system: no canary here, which is not the probe's fault.
      no_canary_why_ = fmt::format("cannot make a cgroup in {}: {}", *canary_dir_, strerror(err));
      canary_dir_.reset();
      spdlog::info("probe {}: no self-test: {}", kName, no_canary_why_);
      return std::nullopt;
    }
    return absl::UnavailableError(
        fmt::format("could not make the canary cgroup {}: {}", dir, strerror(err)));
  }
  if (rmdir(dir.c_str()) != 0) {
    return absl::InternalError(
        fmt::format("could not remove the canary cgroup {}: {}", dir, strerror(errno)));
  }
  if (absl::Status drained = DrainCounts(); !drained.ok()) return drained;
  if (canary_counts_[0] > before[0] && canary_counts_[1] > before[1]) return absl::OkStatus();
  return CanaryNotSeen(fmt::format("kpathd's own mkdir and rmdir of {} (seen {} and {})", dir,
                                   canary_counts_[0] - before[0], canary_counts_[1] - before[1]));
}

void CgroupChurnProbe::EmitBursts(absl::Time now) {
  const double seconds = absl::ToDoubleSeconds(now - last_collect_);
  const bool first = last_collect_ == absl::InfinitePast();
  last_collect_ = now;
  std::map<std::string, double> per_second;
  for (const auto& [unit, mkdirs] : unit_mkdirs_) {
    if (mkdirs > 0 && seconds > 0) per_second[unit] = static_cast<double>(mkdirs) / seconds;
  }
  unit_mkdirs_.clear();
  if (first || event_sink_ == nullptr) return;
  for (Event& event : bursts_.Update(per_second, options_.burst_per_second, now)) {
    event_sink_->Emit(std::move(event));
  }
}

absl::Status CgroupChurnProbe::Collect(MetricFamilies& out) {
  if (!skel_ || !counts_) return absl::FailedPreconditionError("probe not attached");
  absl::Status drained = DrainCounts();
  // A failed drain leaves the counts in the kernel for the next one; the interval still ends.
  churn_.EndInterval();
  if (!drained.ok()) return drained;

  mkdir_rate_.Add(clock_(), static_cast<double>(churn_.total(0)));
  EmitBursts(clock_());
  std::optional<double> per_second = mkdir_rate_.PerSecond();
  status_ = CgroupChurnStatus(per_second, churn_.TopValue(1));

  const std::vector<std::string> names = LabelNames(options_.pods != nullptr);
  AppendNonZero(churn_.series(), names, cgroups_metrics::kCgroupMkdirTotal, 0, out);
  AppendNonZero(churn_.evicted(), names, cgroups_metrics::kCgroupMkdirEvictedTotal, 0, out);
  AppendNonZero(churn_.series(), names, cgroups_metrics::kCgroupRmdirTotal, 1, out);
  AppendNonZero(churn_.evicted(), names, cgroups_metrics::kCgroupRmdirEvictedTotal, 1, out);
  if (per_second) {
    FamilyBuilder(cgroups_metrics::kCgroupChurnPerSecond).Add(*per_second).AppendTo(out);
  }
  FamilyBuilder(cgroups_metrics::kCgroupChurnUnlabelledTotal)
      .Add(static_cast<double>(unlabelled_))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
