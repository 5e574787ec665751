#include "probes/slab/slabinfo_readers_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/collect/bpf_maps.h"
#include "probes/collect/bpf_skeleton.h"
#include "probes/collect/health_metrics.h"
#include "probes/collect/label_values.h"
#include "probes/slab/slab_metrics.h"
#include "probes/slab/slabinfo_readers.h"
#include "slabinfo_readers.legacy.skel.h"
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
    : BpfProbe(kName, kernel, std::move(allowed)),
      readers_({"comm"}, {static_cast<size_t>(labels.comm)}, 1) {}

SlabinfoReadersProbe::~SlabinfoReadersProbe() { Detach(); }

std::vector<AttachPlan> SlabinfoReadersProbe::Plans() const {
  return PlansFor(kMechanisms, kDefaultMechanisms, [](Mechanism m) {
    if (m == Mechanism::kTracepoint) return std::vector<std::string>{TracepointTarget()};
    return std::vector<std::string>{std::string(kOpenFunction)};
  });
}

std::vector<std::pair<std::string, int>> SlabinfoReadersProbe::OpenSyscalls(std::string* why) {
  std::vector<std::pair<std::string, int>> found;
  std::vector<std::string> problems;
  for (const OpenSyscall& sc : kOpenSyscalls) {
    absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint("syscalls", sc.event);
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

absl::Status SlabinfoReadersProbe::Supported(const AttachPlan& plan) {
  switch (plan.mechanism) {
    case Mechanism::kFentry:
      if (!kernel_.HasVmlinuxBtf()) return absl::UnavailableError("no vmlinux BTF");
      if (!kernel_.BtfHasFunction(kOpenFunction)) return absl::NotFoundError("function not in BTF");
      return absl::OkStatus();
    case Mechanism::kKprobe:
      if (absl::Status s = kernel_.KprobesAvailable(); !s.ok()) return s;
      if (!kernel_.KernelFunction(kOpenFunction)) {
        return absl::NotFoundError("function not in kallsyms");
      }
      return absl::OkStatus();
    case Mechanism::kTracepoint: {
      std::string why;
      std::vector<std::pair<std::string, int>> syscalls = OpenSyscalls(&why);
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

absl::Status SlabinfoReadersProbe::Attach(const AttachPlan& plan) {
  Detach();
  OwnedSkeleton<slabinfo_readers_bpf> skel =
      KPATH_OPEN_SKELETON(slabinfo_readers, kernel_.HasBpfGlobalData());
  if (!skel) return LibbpfError("open", errno);
  skel->rodata->self_tgid = static_cast<__u32>(getpid());
  skel->rodata->self_pidns_dev = OwnPidNamespaceForBpf().dev;
  skel->rodata->self_pidns_ino = OwnPidNamespaceForBpf().ino;

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
      syscalls = OpenSyscalls(nullptr);
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
  EnableOnly(skel->obj, chosen);
  if (int err = slabinfo_readers_bpf__load(skel.get()); err) return LibbpfError("load", err);
  if (absl::Status s = FillTunablesMap(skel->obj); !s.ok()) return s;

  absl::StatusOr<KeyedCounterMaps> maps = KeyedCounterMaps::Find(skel->obj, "slabinfo_reads");
  if (!maps.ok()) return maps.status();

  if (absl::Status s = AttachAndRemember(chosen, plan); !s.ok()) return s;
  programs_ = LoadedPrograms(kName, skel->obj);
  counts_ = *std::move(maps);
  unreadable_fd_ = bpf_map__fd(skel->maps.slabinfo_unreadable);
  skel_ = std::move(skel);
  return absl::OkStatus();
}

void SlabinfoReadersProbe::Detach() {
  BpfProbe::Detach();
  counts_.reset();
  skel_.reset();
  unreadable_fd_ = -1;
}

void SlabinfoReadersProbe::SetLabelLimits(const LabelLimits& labels) {
  readers_.SetTopN({static_cast<size_t>(labels.comm)});
}

std::optional<absl::Status> SlabinfoReadersProbe::SelfTest() {
  if (!skel_) return absl::FailedPreconditionError("not attached");
  return CanaryCounted(bpf_map__fd(skel_->maps.slabinfo_events), SLABINFO_EVENT_SELF_OPEN,
                       "kpathd's own open of /proc/slabinfo", [] {
                         // The absolute path the syscall tracepoints recognise, from the stack: a
                         // page the process has touched, readable at syscall entry. Opened, never
                         // read: the read is what walks the slabs with IRQs off. The running
                         // kernel's file, whatever --procfs-root says.
                         char path[] = "/proc/slabinfo";
                         int fd = open(path, O_RDONLY | O_CLOEXEC);
                         if (fd < 0) {
                           return absl::UnavailableError(
                               fmt::format("could not open {}: {}", path, strerror(errno)));
                         }
                         close(fd);
                         return absl::OkStatus();
                       });
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
  readers_.AppendFamilies(slab_metrics::kSlabinfoReadsTotal,
                          slab_metrics::kSlabinfoReadsEvictedTotal, 0, out);

  absl::StatusOr<uint64_t> unreadable = SumPerCpu(unreadable_fd_, 0, "read slabinfo_unreadable");
  if (!unreadable.ok()) return unreadable.status();
  FamilyBuilder(health_metrics::kEventsLostTotal)
      .Add({{"probe", std::string(kName)}, {"reason", "path_unreadable"}},
           static_cast<double>(*unreadable))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
