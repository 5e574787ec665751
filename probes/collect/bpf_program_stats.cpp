#include "probes/collect/bpf_program_stats.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "absl/strings/strip.h"
#include "fmt/format.h"

namespace kpath {

absl::StatusOr<BpfProgramRunStats> ReadBpfProgramRunStats(int prog_fd) {
  struct bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  __u32 len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        fmt::format("bpf_obj_get_info_by_fd: {}", std::strerror(err)));
  }
  return BpfProgramRunStats{info.run_time_ns, info.run_cnt, info.id};
}

bool KernelBpfStatsEnabled(const HostPaths& paths) {
  auto text = ReadFileToString(paths.Proc("sys/kernel/bpf_stats_enabled"), 64);
  return text.ok() && absl::StripAsciiWhitespace(*text) == "1";
}

namespace {
std::atomic<int> bpf_stats_holds{0};
}  // namespace

void NoteBpfStatsHeldByKpathd(bool held) { bpf_stats_holds.fetch_add(held ? 1 : -1); }

bool BpfRunStatsComplete(const HostPaths& paths) {
  return bpf_stats_holds.load() > 0 || KernelBpfStatsEnabled(paths);
}

namespace {
std::mutex sampled_mu;
std::map<uint32_t, BpfRunEstimate>& SampledEstimates() {
  static std::map<uint32_t, BpfRunEstimate> estimates;
  return estimates;
}
}  // namespace

void AddSampledBpfRunEstimate(uint32_t program_id, const BpfRunEstimate& estimate) {
  std::lock_guard<std::mutex> lock(sampled_mu);
  BpfRunEstimate& into = SampledEstimates()[program_id];
  into.run_time_ns += estimate.run_time_ns;
  into.run_count += estimate.run_count;
}

std::map<uint32_t, BpfRunEstimate> TakeSampledBpfRunEstimates() {
  std::lock_guard<std::mutex> lock(sampled_mu);
  std::map<uint32_t, BpfRunEstimate> out;
  out.swap(SampledEstimates());
  return out;
}

void OwnBpfRunCost::Update(const Key& key, const BpfProgramRunStats& kernel, bool complete,
                           std::optional<BpfRunEstimate> estimate) {
  Account& a = accounts_[key];
  // A new program under the same name (the probe re-attached) starts its counters afresh.
  const bool same_program = a.has_last && a.last.id == kernel.id &&
                            kernel.run_time_ns >= a.last.run_time_ns &&
                            kernel.run_count >= a.last.run_count;
  if (complete) {
    // Exact: what the kernel counted since the previous collection (all of it, the first time:
    // the counters only move while statistics are on).
    a.total.run_time_ns +=
        static_cast<double>(kernel.run_time_ns - (same_program ? a.last.run_time_ns : 0));
    a.total.run_count +=
        static_cast<double>(kernel.run_count - (same_program ? a.last.run_count : 0));
    a.priced = true;
  } else if (estimate) {
    // The kernel's counters moved only during the slices; the estimate scales them to the
    // whole time, so it replaces them.
    a.total.run_time_ns += estimate->run_time_ns;
    a.total.run_count += estimate->run_count;
    a.priced = true;
  }
  a.last = kernel;
  a.has_last = true;
}

std::optional<BpfRunEstimate> OwnBpfRunCost::Total(const Key& key) const {
  auto it = accounts_.find(key);
  if (it == accounts_.end() || !it->second.priced) return std::nullopt;
  return it->second.total;
}

}  // namespace kpath
