#include "probes/madvise/tlb_flush_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "probes/madvise/madvise_metrics.h"
#include "probes/madvise/tlb_flush.h"
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
    : kernel_(kernel), allowed_(std::move(allowed)) {}

TlbFlushProbe::~TlbFlushProbe() { Detach(); }

std::vector<AttachPlan> TlbFlushProbe::Plans() const {
  return {{Mechanism::kTpBtf, TracepointName()},
          {Mechanism::kRawTp, TracepointName()},
          {Mechanism::kTracepoint, TracepointName()}};
}

absl::Status TlbFlushProbe::Supported(const AttachPlan& plan, KernelFeatures& kernel) {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf: {
      if (!kernel.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      std::optional<int> args = kernel.BtfTracepointArgs(kEvent);
      if (!args) return absl::NotFoundError("tracepoint not in BTF (btf_trace_tlb_flush)");
      if (*args != 2) return absl::UnimplementedError(fmt::format("{} arguments, not 2", *args));
      return absl::OkStatus();
    }
    case Mechanism::kRawTp:
      // Only x86 defines this tracepoint (arm64 flushes with broadcast TLBI, no IPI).
      if (!kernel.TracepointExists(kCategory, kEvent)) {
        return absl::NotFoundError("kernel has no such tracepoint (x86 only)");
      }
      // raw_tp checks the arguments read against the tracepoint's arity at attach time.
      return absl::OkStatus();
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      const TracepointField* reason = format->Find("reason");
      if (!reason || reason->size > 8) return absl::NotFoundError("format has no reason field");
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

absl::Status TlbFlushProbe::Attach(const AttachPlan& plan, KernelFeatures& kernel) {
  Detach();
  OwnedSkeleton<tlb_flush_bpf> skel(tlb_flush_bpf__open(), tlb_flush_bpf__destroy);
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
      absl::StatusOr<TracepointFormat> format = kernel.Tracepoint(kCategory, kEvent);
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
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel->obj) { bpf_program__set_autoload(prog, prog == chosen); }
  if (int err = tlb_flush_bpf__load(skel.get()); err) return LibbpfError("load", err);
  bpf_link* link = bpf_program__attach(chosen);
  if (!link) return LibbpfError("attach", errno);
  link_.reset(link);
  program_name_ = bpf_program__name(chosen);
  program_fd_ = bpf_program__fd(chosen);
  flushes_fd_ = bpf_map__fd(skel->maps.tlb_flushes);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

void TlbFlushProbe::Detach() {
  link_.reset();
  skel_.reset();
  program_fd_ = -1;
  flushes_fd_ = -1;
}

absl::Status TlbFlushProbe::Start() {
  if (absl::Status s = StartProbe(*this, kernel_, allowed_, state_); !s.ok()) return s;
  return absl::OkStatus();
}

std::vector<OwnBpfProgram> TlbFlushProbe::Programs() const {
  if (program_fd_ < 0) return {};
  return {OwnBpfProgram{std::string(kName), program_name_, program_fd_}};
}

absl::Status TlbFlushProbe::Collect(MetricFamilies& out) {
  if (flushes_fd_ < 0) return absl::FailedPreconditionError("probe not attached");
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return LibbpfError("libbpf_num_possible_cpus", ncpus);
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpus));
  FamilyBuilder flushes(madvise_metrics::kTlbFlushesTotal);
  for (uint32_t slot = 0; slot < TLB_FLUSH_SLOTS; ++slot) {
    if (bpf_map_lookup_elem(flushes_fd_, &slot, per_cpu.data()) != 0) {
      return LibbpfError("read tlb_flushes map", errno);
    }
    uint64_t sum = 0;
    for (uint64_t v : per_cpu) sum += v;
    flushes.Add({{"reason", std::string(TlbFlushReasonName(slot))}}, static_cast<double>(sum));
  }
  flushes.AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
