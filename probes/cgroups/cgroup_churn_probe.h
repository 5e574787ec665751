// cgroup churn (seed 000): every cgroup mkdir and rmdir, by process and systemd unit, and how
// many cgroups are created per second. In seed 000, second-level systemd timers created a
// service cgroup (and its memory cgroup, 16.5 KiB of per-CPU memory per CPU) every few seconds;
// these metrics name the unit and the process doing it.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "probes/cgroups/kubernetes_pods.h"
#include "probes/collect/bpf_handles.h"
#include "probes/collect/bpf_probe.h"
#include "probes/collect/folded_counters.h"
#include "probes/collect/growth_rate.h"
#include "probes/collect/keyed_counter_maps.h"
#include "probes/collect/label_limits.h"
#include "probes/collect/rate_bursts.h"
#include "probes/kernel/kernel_features.h"

struct cgroup_churn_bpf;
struct bpf_link;
struct cgroup_churn_key;
struct cgroup_churn_path;

namespace kpath {

// The unit label of a path tail the BPF programs sent (valid UTF-8).
std::string CgroupChurnUnit(const cgroup_churn_path& path);

// The Kubernetes pod (and container) a path tail names, if any (ParseKubepodsCgroupTail).
std::optional<KubepodsCgroup> CgroupChurnPod(const cgroup_churn_path& path);

// Whether every name of the shape of `path`'s name (its last component, digits replaced) gives
// the labels `path` gives: the digits are folded away (run-u123.scope), not kept
// (user@1000.service, php8.2-fpm.service). With `pod_labels`, the pod and container the name
// gives count too: a pod slice's or a container scope's digits are its uid or id, so they
// "depend" (two pods never share a shape's key). False for a name without digits.
bool CgroupChurnShapeFoldsAlike(const cgroup_churn_path& path, bool pod_labels = false);

// The {comm, unit} labels of a key the BPF programs counted under and of its path tail, both
// valid UTF-8.
std::vector<std::string> CgroupChurnLabels(const cgroup_churn_key& key,
                                           const cgroup_churn_path& path);

// "cgroup churn 12/s (top unit foo.service)": the STATUS= fragment; without the unit when none
// is known, empty before there is a rate.
std::string CgroupChurnStatus(std::optional<double> per_second, std::string_view top_unit);

struct CgroupChurnOptions {
  std::vector<Mechanism> allowed;  // empty: all, in the probe's order
  LabelLimits labels;
  // kpath_cgroup_churn_per_second is fitted over this window (meminfo.percpu_growth_window, so
  // that Percpu growth / churn reads as bytes per cgroup creation).
  absl::Duration churn_window = absl::Seconds(60);
  // cgroups.churn_burst_per_second: a unit's churn burst starts from this many cgroups per second.
  double burst_per_second = 10;
  // Labels namespace, pod and container of a cgroup in the kubepods tree
  // (kubernetes.pod_labels), from its path; null: no such labels.
  std::shared_ptr<PodAttribution> pods;
};

class CgroupChurnProbe final : public BpfProbe {
 public:
  static constexpr std::string_view kName = "cgroup_churn";
  static constexpr std::string_view kCategory = "cgroup";
  static constexpr std::array kMechanisms{Mechanism::kTpBtf, Mechanism::kRawTp,
                                          Mechanism::kTracepoint};
  static constexpr std::array kDefaultMechanisms = kMechanisms;
  static constexpr std::string_view kMkdirEvent = "cgroup_mkdir";
  static constexpr std::string_view kRmdirEvent = "cgroup_rmdir";
  using Clock = std::function<absl::Time()>;

  CgroupChurnProbe(KernelFeatures& kernel, CgroupChurnOptions options, Clock clock = absl::Now);
  ~CgroupChurnProbe() override;

  absl::Status Collect(MetricFamilies& out) override;
  // Canary: kpathd makes and removes a scratch cgroup under its own (CgroupCanaryParent) and
  // checks that the programs counted both; its counts stay out of the metrics. nullopt when
  // kpathd may not make a cgroup there (systemd owns the cgroup and did not delegate it, or the
  // cgroup file system is read-only to kpathd, as under the shipped unit's
  // ProtectControlGroups=yes): the canary cannot be made without weakening the sandbox.
  std::optional<absl::Status> SelfTest() override;
  void SetLabelLimits(const LabelLimits& limits) override;
  // On config reload; samples outside the new window are dropped at once.
  void SetChurnWindow(absl::Duration window) { mkdir_rate_.SetWindow(window); }
  void SetBurstThreshold(double per_second) { options_.burst_per_second = per_second; }
  void SetEventSink(EventSink* sink) override { event_sink_ = sink; }

  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan) override;
  absl::Status Attach(const AttachPlan& plan) override;
  void Detach() override;

 private:
  std::string OnAttached() override { return "keyed by " + key_source_; }
  // kMkdirEvent's or kRmdirEvent's argument count in BTF (KernelLayout::Tracepoints()).
  std::optional<int> EventArity(std::string_view event) const;

  CgroupChurnOptions options_;
  Clock clock_;
  OwnedSkeleton<cgroup_churn_bpf> skel_{nullptr, nullptr};
  std::optional<KeyedCounterMaps> counts_;
  int paths_fd_[2] = {-1, -1};  // churn_paths_0, churn_paths_1: path tails by hash, per buffer
  int shapes_fd_ = -1;          // churn_shapes: the name shapes the programs count by

  // Offsets from vmlinux BTF for the programs' reads from kernel structures (0: none; see
  // cgroup_churn.bpf.c).
  struct DirectReads {
    uint32_t task_comm = 0;
    uint32_t cgroup_kn = 0;
    uint32_t kn_hash = 0;
    uint32_t kn_name = 0;
    uint32_t cgroup_parent = 0;
    uint32_t css_serial = 0;
    uint32_t cgroup_root = 0;
    uint32_t root_hierarchy_id = 0;
    bool operator==(const DirectReads&) const = default;
  };
  DirectReads DirectReadsFor(const AttachPlan& plan);
  // Loads and attaches `plan`; on a failed load (not a failed attach) sets `load_failed`.
  absl::Status AttachWith(const AttachPlan& plan, const DirectReads& reads, bool& load_failed);
  // What a path key stands for.
  struct PathInfo {
    std::string unit;
    std::optional<KubepodsCgroup> cgroup;  // with pod labels: the pod the path names
    PodLabels pod;                         // and its names
    uint32_t hierarchy = 0;                // cgroup_churn_path.hierarchy
    bool canary = false;                   // kpathd's own scratch cgroup (SelfTest)
  };
  // The series labels of a key's counts: comm, unit and, with pods, namespace, pod, container.
  std::vector<std::string> SeriesLabels(const cgroup_churn_key& key, const PathInfo* info) const;
  std::vector<size_t> TopN(const LabelLimits& limits) const;
  // The path key counted in `buffer`: from the path sent with it, else the last one known for
  // the key; null if none.
  const PathInfo* PathOf(uint64_t path_key, uint32_t buffer);
  // Lets the programs count `path`'s name shape under one key when its names all fold to
  // `info`'s unit (cgroup_churn.h); each shape is judged once.
  void LearnShape(const cgroup_churn_path& path, const PathInfo& info);
  void EmptyPaths(uint32_t buffer);
  // Finds where the canary's scratch cgroup goes (once): canary_dir_, or no_canary_why_.
  void FindCanaryDirectory();
  // Drains the kernel's counts into churn_ (the canary's into canary_counts_), each unit start
  // once however many hierarchies it made its cgroup in.
  absl::Status DrainCounts();

  // The last path of each path key seen; emptied when it grows past a bound.
  std::unordered_map<uint64_t, PathInfo> paths_;
  // Name shapes judged: what each known one stands for, and the ones that fold by their digits
  // (never counted by shape); emptied when they grow past a bound.
  std::unordered_map<uint64_t, PathInfo> shapes_;
  std::unordered_set<uint64_t> shapes_refused_;
  // The canary: the scratch cgroup's name, its directory (empty: no canary here, and why), and
  // the mkdirs and rmdirs of it the programs counted.
  std::string canary_name_;
  std::optional<std::string> canary_dir_;
  std::string no_canary_why_;
  // Per {comm, unit}: mkdirs and rmdirs made in each hierarchy and the most counted so far
  // (DrainCounts), kept while the pair is active.
  struct HierarchyTotals {
    std::map<uint32_t, std::array<uint64_t, 2>> by_hierarchy;
    std::array<uint64_t, 2> counted = {0, 0};
    uint64_t last_drain = 0;
  };
  static constexpr uint64_t kHierarchyMemory = 12;
  std::map<std::vector<std::string>, HierarchyTotals> hierarchy_totals_;
  uint64_t drains_ = 0;
  bool canary_looked_up_ = false;
  uint64_t canary_counts_[2] = {0, 0};
  std::string key_source_;  // how the programs key paths, for the log and state

  FoldedCounters churn_;     // {comm, unit[, namespace, pod, container]} -> {mkdirs, rmdirs}
  uint64_t unlabelled_ = 0;  // events counted in the overflow slot (the hash was full)
  WindowedSlope mkdir_rate_;

  // Churn bursts: the cgroups each unit made since the last Collect (DrainCounts), as rates.
  void EmitBursts(absl::Time now);
  EventSink* event_sink_ = nullptr;
  RateBursts bursts_{kCgroupChurnBursts};
  std::map<std::string, uint64_t> unit_mkdirs_;
  absl::Time last_collect_ = absl::InfinitePast();
};

}  // namespace kpath
