// Percpu allocations (seed 000): every allocation of per-CPU memory, counted in the kernel.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "probes/collect/collector.h"
#include "probes/collect/probe_attacher.h"
#include "probes/kernel/kernel_features.h"

struct percpu_bpf;
struct bpf_link;

namespace kpath {

class PercpuAllocProbe final : public Collector, public AttachableProbe {
 public:
  static constexpr std::string_view kName = "percpu_alloc";
  static constexpr std::string_view kCategory = "percpu";
  static constexpr std::string_view kEvent = "percpu_alloc_percpu";

  // `allowed`: restrict to these mechanisms (empty: all, in the probe's order).
  PercpuAllocProbe(KernelFeatures& kernel, std::vector<Mechanism> allowed);
  ~PercpuAllocProbe() override;

  // Collector
  std::string_view Name() const override { return kName; }
  absl::Status Start() override;
  absl::Status Collect(MetricFamilies& out) override;
  void Stop() override { Detach(); }
  std::vector<ProbeState> Probes() const override { return {state_}; }
  std::vector<OwnBpfProgram> Programs() const override;

  // AttachableProbe
  std::string_view ProbeName() const override { return kName; }
  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan, KernelFeatures& kernel) override;
  absl::Status Attach(const AttachPlan& plan, KernelFeatures& kernel) override;
  void Detach() override;

 private:
  // Which argument layout the tracepoint has (see percpu.bpf.c).
  enum class Layout { kUnknown, kWithBytesAlloc, kLegacy };
  Layout TracepointLayout(KernelFeatures& kernel);

  struct SkeletonDeleter {
    void operator()(percpu_bpf* skel) const;
  };
  struct LinkDeleter {
    void operator()(bpf_link* link) const;
  };

  KernelFeatures& kernel_;
  std::vector<Mechanism> allowed_;
  ProbeState state_{std::string(kName), Mechanism::kNone, "not started"};
  std::unique_ptr<percpu_bpf, SkeletonDeleter> skel_;
  std::unique_ptr<bpf_link, LinkDeleter> link_;
  std::string program_name_;
  int program_fd_ = -1;
  int totals_map_fd_ = -1;
};

}  // namespace kpath
