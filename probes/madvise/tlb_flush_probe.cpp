#include "probes/madvise/tlb_flush_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "probes/collect/bpf_maps.h"
#include "probes/collect/bpf_skeleton.h"
#include "probes/madvise/madvise_metrics.h"
#include "probes/madvise/tlb_flush.h"
#include "tlb_flush.legacy.skel.h"
#include "tlb_flush.skel.h"

namespace kpath {

namespace {

// enum tlb_flush_reason of include/linux/mm_types.h, in its order; the tracepoint's print fmt
// spells out the same numbers ("{ 1, "remote shootdown" }"), which a unit test checks against a
// captured format file.
constexpr std::array<std::string_view, TLB_FLUSH_SLOTS> kReasonNames = {"task_switch",
                                                                        "remote_shootdown",
                                                                        "local_shootdown",
                                                                        "local_mm_shootdown",
                                                                        "remote_send_ipi",
                                                                        "remote_wrong_cpu",
                                                                        "other"};

std::string TracepointName() {
  return fmt::format("{}:{}", TlbFlushProbe::kCategory, TlbFlushProbe::kEvent);
}

}  // namespace

std::string_view TlbFlushReasonName(uint32_t slot) {
  return slot < kReasonNames.size() ? kReasonNames[slot] : kReasonNames.back();
}

TlbFlushProbe::TlbFlushProbe(KernelFeatures& kernel, std::vector<Mechanism> allowed)
    : BpfProbe(kName, kernel, std::move(allowed)) {}

TlbFlushProbe::~TlbFlushProbe() { Detach(); }

std::vector<AttachPlan> TlbFlushProbe::Plans() const {
  return PlansFor(kMechanisms, kDefaultMechanisms,
                  [](Mechanism) { return std::vector<std::string>{TracepointName()}; });
}

absl::Status TlbFlushProbe::Supported(const AttachPlan& plan) {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf: {
      if (!kernel_.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      std::optional<int> args = kernel_.Layout().Tracepoints().tlb_flush;
      if (!args) return absl::NotFoundError("tracepoint not in BTF (btf_trace_tlb_flush)");
      if (*args != 2) return absl::UnimplementedError(fmt::format("{} arguments, not 2", *args));
      return absl::OkStatus();
    }
    case Mechanism::kRawTp:
      // The tracepoint is generic (include/trace/events/tlb.h) but only x86's TLB code fires it:
      // Debian 12's arm64 6.1 has it and attaches it (tp_btf), and it counts nothing there, since
      // arm64 invalidates other CPUs' TLBs with broadcast TLBI instructions, not IPIs.
      if (!kernel_.TracepointExists(kCategory, kEvent)) {
        return absl::NotFoundError("kernel has no such tracepoint");
      }
      // raw_tp checks the arguments read against the tracepoint's arity at attach time.
      return absl::OkStatus();
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      const TracepointField* reason = format->Find("reason");
      if (!reason || reason->size > 8) return absl::NotFoundError("format has no reason field");
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

absl::Status TlbFlushProbe::Attach(const AttachPlan& plan) {
  Detach();
  OwnedSkeleton<tlb_flush_bpf> skel = KPATH_OPEN_SKELETON(tlb_flush, kernel_.HasBpfGlobalData());
  if (!skel) return LibbpfError("open", errno);
  bpf_program* chosen = nullptr;
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      chosen = skel->progs.tlb_flush_tp_btf;
      break;
    case Mechanism::kRawTp:
      chosen = skel->progs.tlb_flush_raw_tp;
      break;
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      const TracepointField* reason = format->Find("reason");
      if (!reason || reason->size > 8) return absl::NotFoundError("format has no reason field");
      skel->rodata->tp_reason_offset = reason->offset;
      skel->rodata->tp_reason_size = reason->size;
      chosen = skel->progs.tlb_flush_tracepoint;
      break;
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
  EnableOnly(skel->obj, {chosen});
  if (int err = tlb_flush_bpf__load(skel.get()); err) return LibbpfError("load", err);
  if (absl::Status s = FillTunablesMap(skel->obj); !s.ok()) return s;
  if (absl::Status s = AttachAndRemember({chosen}, plan, "attach"); !s.ok()) return s;
  ListPrograms({chosen});
  flushes_fd_ = bpf_map__fd(skel->maps.tlb_flushes);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

void TlbFlushProbe::Detach() {
  BpfProbe::Detach();
  skel_.reset();
  flushes_fd_ = -1;
}

absl::Status TlbFlushProbe::Collect(MetricFamilies& out) {
  if (flushes_fd_ < 0) return absl::FailedPreconditionError("probe not attached");
  FamilyBuilder flushes(madvise_metrics::kTlbFlushesTotal);
  for (uint32_t slot = 0; slot < TLB_FLUSH_SLOTS; ++slot) {
    absl::StatusOr<uint64_t> sum = SumPerCpu(flushes_fd_, slot, "read tlb_flushes map");
    if (!sum.ok()) return sum.status();
    flushes.Add({{"reason", std::string(TlbFlushReasonName(slot))}}, static_cast<double>(*sum));
  }
  flushes.AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
