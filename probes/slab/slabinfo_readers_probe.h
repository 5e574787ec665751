// Who opens /proc/slabinfo (seed 001): kpath_slabinfo_reads_total{comm}. See
// slabinfo_readers.bpf.c for the ways of seeing it.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/collect/bpf_handles.h"
#include "probes/collect/bpf_probe.h"
#include "probes/collect/folded_counters.h"
#include "probes/collect/keyed_counter_maps.h"
#include "probes/collect/label_limits.h"
#include "probes/kernel/kernel_features.h"

struct slabinfo_readers_bpf;
struct bpf_link;

namespace kpath {

class SlabinfoReadersProbe final : public BpfProbe {
 public:
  static constexpr std::string_view kName = "slabinfo_readers";
  static constexpr std::array kMechanisms{Mechanism::kFentry, Mechanism::kKprobe,
                                          Mechanism::kTracepoint};
  // Not the syscall tracepoints: they tax every system call of the host; used only when asked.
  static constexpr std::array kDefaultMechanisms{Mechanism::kFentry, Mechanism::kKprobe};
  // The kernel's open method of /proc/slabinfo (mm/slab_common.c).
  static constexpr std::string_view kOpenFunction = "slabinfo_open";

  SlabinfoReadersProbe(KernelFeatures& kernel, std::vector<Mechanism> allowed, LabelLimits labels);
  ~SlabinfoReadersProbe() override;

  absl::Status Collect(MetricFamilies& out) override;
  // Canary: kpathd opens /proc/slabinfo (no read) and checks that the programs saw its process
  // do it (counted apart, never as a reader).
  std::optional<absl::Status> SelfTest() override;
  void SetLabelLimits(const LabelLimits& labels) override;
  std::vector<AttachPlan> Plans() const override;
  absl::Status Supported(const AttachPlan& plan) override;
  absl::Status Attach(const AttachPlan& plan) override;
  void Detach() override;

 private:
  // The open syscalls this kernel has, with where their filename argument is ("openat" -> 1).
  std::vector<std::pair<std::string, int>> OpenSyscalls(std::string* why);

  OwnedSkeleton<slabinfo_readers_bpf> skel_{nullptr, nullptr};
  std::optional<KeyedCounterMaps> counts_;
  int unreadable_fd_ = -1;
  FoldedCounters readers_;
};

}  // namespace kpath
