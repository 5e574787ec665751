#include "probes/slab/slabinfo_readers_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/collect/health_metrics.h"
#include "probes/collect/label_values.h"
#include "probes/slab/slab_metrics.h"
#include "probes/slab/slabinfo_readers.h"
#include "slabinfo_readers.skel.h"

namespace kpath {

namespace {

// The open syscalls, where their filename argument is, and the record offset that puts it at
// (struct syscall_trace_enter: 16 bytes of header and number, then 8 bytes per argument).
struct OpenSyscall {
  std::string_view event;
  int filename_arg;
};
constexpr OpenSyscall kOpenSyscalls[] = {
    {"sys_enter_openat", 1},
    {"sys_enter_open", 0},  // not on arm64, which has only openat
    {"sys_enter_openat2", 1},
};

std::string TracepointTarget() { return "syscalls:sys_enter_openat,open,openat2"; }

}  // namespace

SlabinfoReadersProbe::SlabinfoReadersProbe(KernelFeatures& kernel, std::vector<Mechanism> allowed,
                                           LabelLimits labels)
    : kernel_(kernel),
      allowed_(std::move(allowed)),
      readers_({"comm"}, {static_cast<size_t>(labels.comm)}, 1) {}

SlabinfoReadersProbe::~SlabinfoReadersProbe() { Detach(); }

std::vector<AttachPlan> SlabinfoReadersProbe::Plans() const {
  return {
      {Mechanism::kFentry, std::string(kOpenFunction)},
      {Mechanism::kKprobe, std::string(kOpenFunction)},
      {Mechanism::kTracepoint, TracepointTarget(), /*costly=*/true},
  };
}

std::vector<std::pair<std::string, int>> SlabinfoReadersProbe::OpenSyscalls(KernelFeatures& kernel,
                                                                            std::string* why) {
  std::vector<std::pair<std::string, int>> found;
  std::vector<std::string> problems;
  for (const OpenSyscall& sc : kOpenSyscalls) {
    absl::StatusOr<TracepointFormat> format = kernel.Tracepoint("syscalls", sc.event);
    if (!format.ok()) {
      if (!absl::IsNotFound(format.status())) {
        problems.push_back(std::string(format.status().message()));
      }
      continue;
    }
    const TracepointField* filename = format->Find("filename");
    const uint32_t expected = 16 + 8 * static_cast<uint32_t>(sc.filename_arg);
    if (!filename || filename->offset != expected || filename->size != 8) {
      problems.push_back(fmt::format("{}: filename not at offset {} (size 8)", sc.event, expected));
      continue;
    }
    found.emplace_back(std::string(sc.event), sc.filename_arg);
  }
  if (why) *why = fmt::format("{}", fmt::join(problems, "; "));
  return found;
}

absl::Status SlabinfoReadersProbe::Supported(const AttachPlan& plan, KernelFeatures& kernel) {
  switch (plan.mechanism) {
    case Mechanism::kFentry:
      if (!kernel.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel.BtfHasFunction(kOpenFunction)) return absl::NotFoundError("function not in BTF");
      return absl::OkStatus();
    case Mechanism::kKprobe:
      if (absl::Status s = kernel.KprobesAvailable(); !s.ok()) return s;
      if (!kernel.KernelFunction(kOpenFunction)) {
        return absl::NotFoundError("function not in kallsyms");
      }
      return absl::OkStatus();
    case Mechanism::kTracepoint: {
      std::string why;
      std::vector<std::pair<std::string, int>> syscalls = OpenSyscalls(kernel, &why);
      bool openat = std::any_of(syscalls.begin(), syscalls.end(),
                                [](const auto& s) { return s.first == "sys_enter_openat"; });
      if (!openat) {
        return absl::NotFoundError(
            why.empty() ? std::string("no syscalls:sys_enter_openat tracepoint") : why);
      }
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
}

absl::Status SlabinfoReadersProbe::Attach(const AttachPlan& plan, KernelFeatures& kernel) {
  Detach();
  OwnedSkeleton<slabinfo_readers_bpf> skel(slabinfo_readers_bpf__open(),
                                           slabinfo_readers_bpf__destroy);
  if (!skel) return LibbpfError("open", errno);
  skel->rodata->self_tgid = static_cast<__u32>(getpid());

  std::vector<bpf_program*> chosen;
  std::vector<std::pair<std::string, int>> syscalls;
  switch (plan.mechanism) {
    case Mechanism::kFentry:
      chosen = {skel->progs.slabinfo_open_fentry};
      break;
    case Mechanism::kKprobe:
      chosen = {skel->progs.slabinfo_open_kprobe};
      break;
    case Mechanism::kTracepoint:
      syscalls = OpenSyscalls(kernel, nullptr);
      for (const auto& [event, arg] : syscalls) {
        if (event == "sys_enter_openat") chosen.push_back(skel->progs.slabinfo_openat_tracepoint);
        if (event == "sys_enter_open") chosen.push_back(skel->progs.slabinfo_open_tracepoint);
        if (event == "sys_enter_openat2") chosen.push_back(skel->progs.slabinfo_openat2_tracepoint);
      }
      if (chosen.empty()) return absl::NotFoundError("no open syscall tracepoint");
      break;
    default:
      return absl::UnimplementedError("mechanism not offered by this probe");
  }
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel->obj) {
    bpf_program__set_autoload(prog, std::find(chosen.begin(), chosen.end(), prog) != chosen.end());
  }
  if (int err = slabinfo_readers_bpf__load(skel.get()); err) return LibbpfError("load", err);

  absl::StatusOr<KeyedCounterMaps> maps = KeyedCounterMaps::Find(skel->obj, "slabinfo_reads");
  if (!maps.ok()) return maps.status();

  std::vector<OwnedLink> links;
  for (bpf_program* p : chosen) {
    bpf_link* link = nullptr;
    if (plan.mechanism == Mechanism::kKprobe) {
      std::optional<std::string> symbol = kernel.KernelFunction(kOpenFunction);
      if (!symbol) return absl::NotFoundError("function not in kallsyms");
      link = bpf_program__attach_kprobe(p, /*retprobe=*/false, symbol->c_str());
    } else {
      link = bpf_program__attach(p);
    }
    if (!link) return LibbpfError(fmt::format("attach {}", bpf_program__name(p)), errno);
    links.emplace_back(link);
  }
  links_ = std::move(links);
  counts_ = *std::move(maps);
  unreadable_fd_ = bpf_map__fd(skel->maps.slabinfo_unreadable);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

void SlabinfoReadersProbe::Detach() {
  links_.clear();
  counts_.reset();
  skel_.reset();
  unreadable_fd_ = -1;
}

absl::Status SlabinfoReadersProbe::Start() {
  if (absl::Status s = StartProbe(*this, kernel_, allowed_, state_); !s.ok()) return s;
  return absl::OkStatus();
}

std::vector<OwnBpfProgram> SlabinfoReadersProbe::Programs() const {
  std::vector<OwnBpfProgram> programs;
  if (!skel_) return programs;
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel_->obj) {
    if (!bpf_program__autoload(prog)) continue;
    int fd = bpf_program__fd(prog);
    if (fd >= 0) programs.push_back({std::string(kName), bpf_program__name(prog), fd});
  }
  return programs;
}

void SlabinfoReadersProbe::SetLabelLimits(const LabelLimits& labels) {
  readers_.SetTopN({static_cast<size_t>(labels.comm)});
}

absl::Status SlabinfoReadersProbe::Collect(MetricFamilies& out) {
  if (!counts_) return absl::FailedPreconditionError("probe not attached");
  std::map<std::string, uint64_t> this_interval;
  absl::Status drained = counts_->Drain([&](const void* key, std::span<const uint64_t> sums) {
    if (sums.empty() || sums[0] == 0) return;
    if (key == nullptr) {  // the hash was full: counted, without a name
      readers_.AddOther(sums);
      return;
    }
    const auto* k = static_cast<const slabinfo_reader_key*>(key);
    std::string comm = CommLabel(k->comm, sizeof(k->comm));
    if (comm.empty()) comm = "unknown";
    this_interval[comm] += sums[0];
    readers_.Add({comm}, sums);
  });
  if (!drained.ok()) return drained;
  readers_.EndInterval();

  status_.clear();
  if (!this_interval.empty()) {
    // The three busiest readers of the interval.
    std::vector<std::pair<uint64_t, std::string>> ranked;
    for (const auto& [comm, opens] : this_interval) ranked.emplace_back(opens, comm);
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::vector<std::string> parts;
    for (size_t i = 0; i < ranked.size() && i < 3; ++i) {
      parts.push_back(fmt::format("{} x{}", ranked[i].second, ranked[i].first));
    }
    if (ranked.size() > 3) parts.push_back(fmt::format("{} more", ranked.size() - 3));
    status_ = fmt::format("/proc/slabinfo opened by {}", fmt::join(parts, ", "));
  }
  FamilyBuilder reads(slab_metrics::kSlabinfoReadsTotal);
  readers_.AppendTo(reads, 0);
  reads.AppendTo(out);

  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return LibbpfError("libbpf_num_possible_cpus", ncpus);
  std::vector<__u64> per_cpu(static_cast<size_t>(ncpus));
  __u32 zero = 0;
  if (bpf_map_lookup_elem(unreadable_fd_, &zero, per_cpu.data()) != 0) {
    return LibbpfError("read slabinfo_unreadable", errno);
  }
  __u64 unreadable = 0;
  for (__u64 v : per_cpu) unreadable += v;
  FamilyBuilder(health_metrics::kEventsLostTotal)
      .Add({{"probe", std::string(kName)}, {"reason", "path_unreadable"}},
           static_cast<double>(unreadable))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
