#include "probes/collect/bpf_program_stats.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <atomic>
#include <cerrno>
#include <cstring>

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
  return BpfProgramRunStats{info.run_time_ns, info.run_cnt};
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

}  // namespace kpath
