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
#include "probes/collect/bpf_probe.h"
#include "probes/kernel/kernel_features.h"

struct tlb_flush_bpf;
struct bpf_link;

namespace kpath {

// The `reason` label of enum tlb_flush_slot (tlb_flush.h): "task_switch", ..., "other".
std::string_view TlbFlushReasonName(uint32_t slot);

class TlbFlushProbe final : public BpfProbe {
 public:
  static constexpr std::string_view kName = "tlb_flush";
  static constexpr std::string_view kCategory = "tlb";
  static constexpr std::array kMechanisms{Mechanism::kTpBtf, Mechanism::kRawTp,
                                          Mechanism::kTracepoint};
  static constexpr std::array kDefaultMechanisms = kMechanisms;
  static constexpr std::string_view kEvent = "tlb_flush";
  // Whether this architecture shoots down other CPUs' TLBs with IPIs, which tlb:tlb_flush counts
  // (x86). arm64 invalidates them with broadcast TLBI instructions: no IPI, nothing for the probe
  // to count (the tracepoint exists on arm64 6.1, not on 4.19, and never fires there), so kpathd
  // makes no tlb_flush probe there and kpath_tlb_* are absent, not a misleading 0.
#if defined(__x86_64__) || defined(__i386__)
  static constexpr bool kArchitectureHasShootdownIpis = true;
#else
  static constexpr bool kArchitectureHasShootdownIpis = false;
#endif

  TlbFlushProbe(KernelFeatures& kernel, std::vector<Mechanism> allowed);
  ~TlbFlushProbe() override;

  absl::Status Collect(MetricFamilies& out) override;
  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan) override;
  absl::Status Attach(const AttachPlan& plan) override;
  void Detach() override;

 private:
  OwnedSkeleton<tlb_flush_bpf> skel_{nullptr, nullptr};
  int flushes_fd_ = -1;
};

}  // namespace kpath
