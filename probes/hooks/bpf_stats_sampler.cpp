#include "probes/hooks/bpf_stats_sampler.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "fmt/format.h"
#include "probes/collect/bpf_program_stats.h"
#include "probes/hooks/bpf_objects.h"

namespace kpath {
namespace {

std::map<uint32_t, BpfStatsSampler::Reading> ReadAllPrograms() {
  std::map<uint32_t, BpfStatsSampler::Reading> readings;
  absl::StatusOr<std::vector<BpfProgramInfo>> programs = ListBpfPrograms();
  if (!programs.ok()) return readings;
  for (const BpfProgramInfo& program : *programs) {
    readings[program.id] = {program.run_time_ns, program.run_count};
  }
  return readings;
}

int EnableRunTimeStats() {
  int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  return fd >= 0 ? fd : -errno;
}

}  // namespace

BpfStatsSampler::BpfStatsSampler(HostPaths paths, absl::Duration period, absl::Duration slice,
                                 ReadAll read_all, EnableStats enable)
    : paths_(std::move(paths)),
      period_(period),
      slice_(std::min(slice, period)),
      read_all_(read_all ? std::move(read_all) : ReadAll(ReadAllPrograms)),
      enable_(enable ? std::move(enable) : EnableStats(EnableRunTimeStats)) {}

BpfStatsSampler::~BpfStatsSampler() { Stop(); }

void BpfStatsSampler::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void BpfStatsSampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::map<uint32_t, BpfStatsSampler::Estimate> BpfStatsSampler::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<uint32_t, Estimate> out;
  out.swap(pending_);
  return out;
}

std::string BpfStatsSampler::LastError() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

uint64_t BpfStatsSampler::Slices() {
  std::lock_guard<std::mutex> lock(mu_);
  return slices_;
}

bool BpfStatsSampler::SleepFor(absl::Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait_for(lock, absl::ToChronoNanoseconds(d), [this] { return stop_; });
  return !stop_;
}

void BpfStatsSampler::Run() {
  using Clock = std::chrono::steady_clock;
  // The previous slice's end: each slice stands for the time since then (the first for a period).
  // (A flag, not std::optional: GCC 12 warns maybe-uninitialized on optional time points.)
  bool have_previous_end = false;
  Clock::time_point previous_end{};
  while (SleepFor(period_ - slice_)) {
    if (KernelBpfStatsEnabled(paths_)) {
      have_previous_end = false;  // exact figures meanwhile; start afresh when the sysctl goes off
      continue;
    }
    int fd = enable_();
    if (fd < 0) {
      std::lock_guard<std::mutex> lock(mu_);
      last_error_ = fmt::format("BPF_ENABLE_STATS: {}", std::strerror(-fd));
      continue;
    }
    std::map<uint32_t, Reading> before = read_all_();
    Clock::time_point start = Clock::now();
    bool running = SleepFor(slice_);
    Clock::time_point end = Clock::now();
    std::map<uint32_t, Reading> after = read_all_();
    ::close(fd);
    if (!running) break;
    double window = std::chrono::duration<double>(end - start).count();
    double covered = have_previous_end ? std::chrono::duration<double>(end - previous_end).count()
                                       : absl::ToDoubleSeconds(period_);
    previous_end = end;
    have_previous_end = true;
    if (window <= 0) continue;
    double scale = covered / window;
    std::lock_guard<std::mutex> lock(mu_);
    last_error_.clear();
    ++slices_;
    for (const auto& [id, now] : after) {
      auto it = before.find(id);
      if (it == before.end() || now.run_time_ns < it->second.run_time_ns ||
          now.run_count < it->second.run_count) {
        continue;  // loaded during the slice: no baseline
      }
      Estimate& estimate = pending_[id];
      estimate.run_time_ns += static_cast<double>(now.run_time_ns - it->second.run_time_ns) * scale;
      estimate.run_count += static_cast<double>(now.run_count - it->second.run_count) * scale;
    }
  }
}

}  // namespace kpath
