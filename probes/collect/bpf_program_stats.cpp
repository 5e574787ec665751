#include "probes/collect/bpf_program_stats.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

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

}  // namespace kpath
