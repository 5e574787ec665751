// The kpathd process: binds /metrics, attaches the probes, runs the sampling clock, answers
// SIGHUP (reload) and SIGTERM/SIGINT (detach everything, exit 0), and talks to systemd.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "daemon/cli.h"
#include "daemon/collector_set.h"
#include "daemon/config.h"
#include "daemon/events/event_log.h"
#include "daemon/least_privilege.h"
#include "daemon/snapshot.h"
#include "daemon/systemd_notify.h"
#include "probes/kernel/kernel_features.h"

namespace kpath {

class MetricsServer;

class Daemon {
 public:
  Daemon(CliOptions cli, Config config);
  ~Daemon();
  // Runs until SIGTERM or SIGINT. The caller must have blocked SIGTERM, SIGINT and SIGHUP in
  // every thread (BlockDaemonSignals) before calling. Returns the process exit code.
  int Run();

 private:
  void SamplerLoop();
  // Every collector's families, and the event log's.
  MetricFamilies Collect();
  // SIGHUP. `requester`: the reload client to answer (reload_request.h), if one asked.
  void Reload(std::optional<pid_t> requester);
  // What the daemon goes on doing once started, for the capabilities it keeps.
  SteadyStateWork SteadyWork(const std::set<int>& tracing_mounts_before) const;

  CliOptions cli_;
  Config config_;  // as running; only the main thread changes it
  SystemdNotifier notifier_;
  std::shared_ptr<Snapshot> snapshot_ = std::make_shared<Snapshot>();
  // SnapshotStaleAfter(sampling_interval), in steady_clock ticks: /-/ready reads it.
  std::atomic<std::chrono::steady_clock::rep> stale_after_{0};
  // What the probes report as events (/events, the journal); outlives the collectors and server.
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<KernelFeatures> kernel_;  // null when bpf.enabled is false
  std::unique_ptr<CollectorSet> collectors_;
  std::unique_ptr<MetricsServer> metrics_server_;

  // Shared between the main thread and the sampler.
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::optional<Config> pending_;         // a reloaded configuration for the sampler to apply
  std::vector<pid_t> reload_requesters_;  // reload clients to answer once pending_ is applied
};

// Blocks the signals the daemon waits for, so that threads created later inherit the mask.
void BlockDaemonSignals();
// Sets up spdlog on stderr (journald adds its own timestamps under systemd) at `level`.
absl::Status ConfigureLogging(const std::string& level);

}  // namespace kpath
