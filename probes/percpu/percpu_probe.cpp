#include "probes/percpu/percpu_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "percpu.skel.h"
#include "probes/percpu/percpu.h"

namespace kpath {

namespace {
// Allocator entry points, newest first: 6.10 renamed the allocator to pcpu_alloc_noprof (with
// __alloc_percpu_gfp a macro over it); before, pcpu_alloc was the static worker behind the
// exported __alloc_percpu_gfp.
constexpr std::string_view kAllocatorFunctions[] = {"pcpu_alloc_noprof", "pcpu_alloc",
                                                    "__alloc_percpu_gfp"};

absl::Status LibbpfError(std::string_view step, int err) {
  err = err < 0 ? -err : err;
  return absl::Status(absl::ErrnoToStatusCode(err),
                      fmt::format("{}: {} (errno {})", step, std::strerror(err), err));
}

std::string TracepointName() {
  return fmt::format("{}:{}", PercpuAllocProbe::kCategory, PercpuAllocProbe::kEvent);
}
}  // namespace

void PercpuAllocProbe::SkeletonDeleter::operator()(percpu_bpf* skel) const {
  percpu_bpf__destroy(skel);
}
void PercpuAllocProbe::LinkDeleter::operator()(bpf_link* link) const { bpf_link__destroy(link); }

PercpuAllocProbe::PercpuAllocProbe(KernelFeatures& kernel, std::vector<Mechanism> allowed)
    : kernel_(kernel), allowed_(std::move(allowed)) {}

PercpuAllocProbe::~PercpuAllocProbe() { Detach(); }

std::vector<AttachPlan> PercpuAllocProbe::Plans() const {
  std::vector<AttachPlan> plans = {
      {Mechanism::kTpBtf, TracepointName()},
      {Mechanism::kRawTp, TracepointName()},
      {Mechanism::kTracepoint, TracepointName()},
  };
  for (Mechanism m : {Mechanism::kFentry, Mechanism::kKprobe}) {
    for (std::string_view fn : kAllocatorFunctions) plans.push_back({m, std::string(fn)});
  }
  return plans;
}

PercpuAllocProbe::Layout PercpuAllocProbe::TracepointLayout(KernelFeatures& kernel) {
  if (std::optional<int> args = kernel.BtfTracepointArgs(kEvent)) {
    if (*args >= 9) return Layout::kWithBytesAlloc;
    if (*args >= 3) return Layout::kLegacy;
    return Layout::kUnknown;
  }
  absl::StatusOr<TracepointFormat> format = kernel.Tracepoint(kCategory, kEvent);
  if (!format.ok()) return Layout::kUnknown;
  return format->Find("bytes_alloc") ? Layout::kWithBytesAlloc : Layout::kLegacy;
}

absl::Status PercpuAllocProbe::Supported(const AttachPlan& plan, KernelFeatures& kernel) {
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      if (!kernel.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel.BtfTracepointArgs(kEvent))
        return absl::NotFoundError("tracepoint not in BTF (btf_trace_percpu_alloc_percpu)");
      return absl::OkStatus();
    case Mechanism::kRawTp:
      if (!kernel.TracepointExists(kCategory, kEvent))
        return absl::NotFoundError("kernel has no such tracepoint");
      if (TracepointLayout(kernel) == Layout::kUnknown)
        return absl::UnavailableError("argument layout unknown (no BTF and no tracefs format)");
      return absl::OkStatus();
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      if (!format->Find("size")) return absl::NotFoundError("format has no size field");
      return absl::OkStatus();
    }
    case Mechanism::kFentry:
      if (!kernel.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel.BtfHasFunction(plan.target)) return absl::NotFoundError("function not in BTF");
      return absl::OkStatus();
    case Mechanism::kKprobe: {
      if (absl::Status s = kernel.KprobesAvailable(); !s.ok()) return s;
      if (!kernel.KernelFunction(plan.target))
        return absl::NotFoundError("function not in kallsyms");
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

absl::Status PercpuAllocProbe::Attach(const AttachPlan& plan, KernelFeatures& kernel) {
  Detach();
  std::unique_ptr<percpu_bpf, SkeletonDeleter> skel(percpu_bpf__open());
  if (!skel) return LibbpfError("open", errno);

  Layout layout = Layout::kUnknown;
  if (plan.mechanism == Mechanism::kTpBtf || plan.mechanism == Mechanism::kRawTp) {
    layout = TracepointLayout(kernel);
  }
  bpf_program* chosen = nullptr;
  switch (plan.mechanism) {
    case Mechanism::kTpBtf:
      chosen = layout == Layout::kLegacy ? skel->progs.percpu_alloc_tp_btf_legacy
                                         : skel->progs.percpu_alloc_tp_btf;
      break;
    case Mechanism::kRawTp:
      chosen = layout == Layout::kLegacy ? skel->progs.percpu_alloc_raw_tp_legacy
                                         : skel->progs.percpu_alloc_raw_tp;
      break;
    case Mechanism::kTracepoint: {
      absl::StatusOr<TracepointFormat> format = kernel.Tracepoint(kCategory, kEvent);
      if (!format.ok()) return format.status();
      const TracepointField* size = format->Find("size");
      if (!size) return absl::NotFoundError("format has no size field");
      skel->rodata->tp_size_offset = size->offset;
      skel->rodata->tp_size_size = size->size;
      if (const TracepointField* bytes = format->Find("bytes_alloc")) {
        skel->rodata->tp_bytes_alloc_offset = bytes->offset;
        skel->rodata->tp_bytes_alloc_size = bytes->size;
      }
      chosen = skel->progs.percpu_alloc_tracepoint;
      break;
    }
    case Mechanism::kFentry: {
      chosen = skel->progs.percpu_alloc_fentry;
      int err = bpf_program__set_attach_target(chosen, 0, plan.target.c_str());
      if (err) return LibbpfError("set fentry target", err);
      break;
    }
    case Mechanism::kKprobe:
      chosen = skel->progs.percpu_alloc_kprobe;
      break;
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }

  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel->obj) { bpf_program__set_autoload(prog, prog == chosen); }
  skel->rodata->nr_possible_cpus = static_cast<__u32>(kernel.PossibleCpus());

  if (int err = percpu_bpf__load(skel.get()); err) return LibbpfError("load", err);

  bpf_link* link = nullptr;
  if (plan.mechanism == Mechanism::kKprobe) {
    std::optional<std::string> symbol = kernel.KernelFunction(plan.target);
    if (!symbol) return absl::NotFoundError("function not in kallsyms");
    link = bpf_program__attach_kprobe(chosen, /*retprobe=*/false, symbol->c_str());
  } else {
    link = bpf_program__attach(chosen);
  }
  if (!link) return LibbpfError("attach", errno);

  link_.reset(link);
  program_name_ = bpf_program__name(chosen);
  program_fd_ = bpf_program__fd(chosen);
  totals_map_fd_ = bpf_map__fd(skel->maps.alloc_totals);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

void PercpuAllocProbe::Detach() {
  link_.reset();
  skel_.reset();
  program_fd_ = -1;
  totals_map_fd_ = -1;
}

absl::Status PercpuAllocProbe::Start() {
  state_ = AttachFirstSupported(*this, kernel_, allowed_);
  if (state_.mechanism == Mechanism::kNone) {
    return absl::UnavailableError(fmt::format("not attached: {}", state_.detail));
  }
  return absl::OkStatus();
}

std::vector<OwnBpfProgram> PercpuAllocProbe::Programs() const {
  if (program_fd_ < 0) return {};
  return {OwnBpfProgram{std::string(kName), program_name_, program_fd_}};
}

absl::Status PercpuAllocProbe::Collect(MetricFamilies& out) {
  if (totals_map_fd_ < 0) return absl::FailedPreconditionError("probe not attached");
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return LibbpfError("libbpf_num_possible_cpus", ncpus);
  std::vector<percpu_alloc_totals> per_cpu(static_cast<size_t>(ncpus));
  __u32 key = 0;
  if (bpf_map_lookup_elem(totals_map_fd_, &key, per_cpu.data()) != 0) {
    return LibbpfError("read alloc_totals map", errno);
  }
  percpu_alloc_totals sum{};
  for (const auto& c : per_cpu) {
    sum.allocs += c.allocs;
    sum.bytes += c.bytes;
  }
  Counter("kpath_percpu_allocs_total", "Percpu allocations seen since kpathd attached its probe.")
      .Add(static_cast<double>(sum.allocs))
      .AppendTo(out);
  Counter("kpath_percpu_alloc_bytes_total",
          "Bytes of percpu memory allocated (summed over all CPUs) since kpathd attached.")
      .Add(static_cast<double>(sum.bytes))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
