// cgroup churn (seed 000): every cgroup mkdir and rmdir, by process and systemd unit, and how
// many cgroups are created per second. In seed 000, second-level systemd timers created a
// service cgroup (and its memory cgroup, 16.5 KiB of per-CPU memory per CPU) every few seconds;
// these metrics name the unit and the process doing it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "probes/collect/bpf_handles.h"
#include "probes/collect/collector.h"
#include "probes/collect/folded_counters.h"
#include "probes/collect/keyed_counter_maps.h"
#include "probes/collect/label_limits.h"
#include "probes/collect/probe_attacher.h"
#include "probes/kernel/kernel_features.h"
#include "probes/procfs/growth_rate.h"

struct cgroup_churn_bpf;
struct bpf_link;
struct cgroup_churn_key;

namespace kpath {

// The {comm, unit} labels of a key the BPF programs counted under, both valid UTF-8.
std::vector<std::string> CgroupChurnLabels(const cgroup_churn_key& key);

// "cgroup churn 12/s (top unit foo.service)": the STATUS= fragment; without the unit when none
// is known, empty before there is a rate.
std::string CgroupChurnStatus(std::optional<double> per_second, std::string_view top_unit);

struct CgroupChurnOptions {
  std::vector<Mechanism> allowed;  // empty: all, in the probe's order
  LabelLimits labels;
  // kpath_cgroup_churn_per_second is fitted over this window (meminfo.percpu_growth_window, so
  // that Percpu growth / churn reads as bytes per cgroup creation).
  absl::Duration churn_window = absl::Seconds(60);
};

class CgroupChurnProbe final : public Collector, public AttachableProbe {
 public:
  static constexpr std::string_view kName = "cgroup_churn";
  static constexpr std::string_view kCategory = "cgroup";
  static constexpr std::string_view kMkdirEvent = "cgroup_mkdir";
  static constexpr std::string_view kRmdirEvent = "cgroup_rmdir";
  using Clock = std::function<absl::Time()>;

  CgroupChurnProbe(KernelFeatures& kernel, CgroupChurnOptions options, Clock clock = absl::Now);
  ~CgroupChurnProbe() override;

  // Collector
  std::string_view Name() const override { return kName; }
  absl::Status Start() override;
  absl::Status Collect(MetricFamilies& out) override;
  void Stop() override { Detach(); }
  std::vector<ProbeState> Probes() const override { return {state_}; }
  std::vector<OwnBpfProgram> Programs() const override { return programs_; }
  void SetLabelLimits(const LabelLimits& limits) override;
  std::string StatusFragment() const override { return status_; }

  // On config reload; samples outside the new window are dropped at once.
  void SetChurnWindow(absl::Duration window) { mkdir_rate_.SetWindow(window); }

  // AttachableProbe
  std::string_view ProbeName() const override { return kName; }
  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan, KernelFeatures& kernel) override;
  absl::Status Attach(const AttachPlan& plan, KernelFeatures& kernel) override;
  void Detach() override;

 private:
  KernelFeatures& kernel_;
  CgroupChurnOptions options_;
  Clock clock_;
  ProbeState state_{std::string(kName), Mechanism::kNone, "not started"};
  OwnedSkeleton<cgroup_churn_bpf> skel_{nullptr, nullptr};
  std::vector<OwnedLink> links_;
  std::vector<OwnBpfProgram> programs_;
  std::optional<KeyedCounterMaps> counts_;

  FoldedCounters churn_;     // {comm, unit} -> {mkdirs, rmdirs}
  uint64_t unlabelled_ = 0;  // events counted in the overflow slot (the hash was full)
  WindowedSlope mkdir_rate_;
  std::string status_;
};

}  // namespace kpath
