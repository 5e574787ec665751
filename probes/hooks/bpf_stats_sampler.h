// hooks.bpf_stats: sampled. The kernel's per-program run-time statistics cost every BPF program
// on the host about 20 ns per run while they are on, so they are held on (a BPF_ENABLE_STATS fd)
// only for a slice of every period, and each program's cost over the whole period is estimated
// from its slice: delta x (time since the previous slice ended) / (slice length). The sysctl
// kernel.bpf_stats_enabled is never written; while someone else has it on, the slices are
// skipped (the collector then reads exact figures).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

class BpfStatsSampler {
 public:
  struct Estimate {
    double run_time_ns = 0;
    double run_count = 0;
  };
  struct Reading {
    uint64_t run_time_ns = 0;
    uint64_t run_count = 0;
  };
  // Hooks for tests: read every program's cumulative statistics; take the statistics fd (an fd,
  // or -errno). Defaults: the bpf syscall.
  using ReadAll = std::function<std::map<uint32_t, Reading>()>;
  using EnableStats = std::function<int()>;

  BpfStatsSampler(HostPaths paths, absl::Duration period, absl::Duration slice,
                  ReadAll read_all = {}, EnableStats enable = {});
  ~BpfStatsSampler();
  BpfStatsSampler(const BpfStatsSampler&) = delete;
  BpfStatsSampler& operator=(const BpfStatsSampler&) = delete;

  void Start();
  void Stop();  // joins the thread; the fd is never left open

  // Estimates gathered since the previous call, by program id.
  std::map<uint32_t, Estimate> Take();
  // Why the last slice could not take the statistics fd; empty when it could.
  std::string LastError();
  // Slices completed so far.
  uint64_t Slices();

 private:
  void Run();
  // Sleeps up to `d`; false when stopping.
  bool SleepFor(absl::Duration d);

  HostPaths paths_;
  absl::Duration period_;
  absl::Duration slice_;
  ReadAll read_all_;
  EnableStats enable_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::map<uint32_t, Estimate> pending_;
  std::string last_error_;
  uint64_t slices_ = 0;
};

}  // namespace kpath
