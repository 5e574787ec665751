// TLB flushes by reason (seed 003): the x86 tlb:tlb_flush tracepoint tells a CPU flushing because
// another asked it to (remote_shootdown, the receiving side of what /proc/interrupts counts as
// TLB shootdowns) from one asking others (remote_send_ipi) and from local flushes. arm64 has no
// such tracepoint: it invalidates with broadcast TLBI instructions, with no IPI to count.
#pragma once

#include <array>
#include <memory>
#include <string_view>
#include <vector>

#include "probes/collect/bpf_handles.h"
#include "probes/collect/collector.h"
#include "probes/collect/probe_attacher.h"
#include "probes/kernel/kernel_features.h"

struct tlb_flush_bpf;
struct bpf_link;

namespace kpath {

// The `reason` label of enum tlb_flush_slot (tlb_flush.h): "task_switch", ..., "other".
std::string_view TlbFlushReasonName(uint32_t slot);

class TlbFlushProbe final : public Collector, public AttachableProbe {
 public:
  static constexpr std::string_view kName = "tlb_flush";
  static constexpr std::string_view kCategory = "tlb";
  static constexpr std::string_view kEvent = "tlb_flush";

  TlbFlushProbe(KernelFeatures& kernel, std::vector<Mechanism> allowed);
  ~TlbFlushProbe() override;

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
  KernelFeatures& kernel_;
  std::vector<Mechanism> allowed_;
  ProbeState state_{std::string(kName), Mechanism::kNone, "not started"};
  OwnedSkeleton<tlb_flush_bpf> skel_{nullptr, nullptr};
  OwnedLink link_;
  std::string program_name_;
  int program_fd_ = -1;
  int flushes_fd_ = -1;
};

}  // namespace kpath
