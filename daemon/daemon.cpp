#include "daemon/daemon.h"

#include <linux/capability.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "daemon/collector_registry.h"
#include "daemon/least_privilege.h"
#include "daemon/log_format.h"
#include "daemon/reload_request.h"
#include "daemon/web/metrics_server.h"
#include "fmt/format.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {
sigset_t DaemonSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// Mount ids of the tracefs and debugfs mounts this process sees (/proc/self/mountinfo).
std::set<int> TracingMountIds() {
  std::set<int> ids;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    // "<id> <parent> <major:minor> <root> <mount point> <options> [<optional>...] - <type> ..."
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream type(line.substr(dash + 3));
    std::string fstype;
    type >> fstype;
    if (fstype == "tracefs" || fstype == "debugfs") ids.insert(std::atoi(line.c_str()));
  }
  return ids;
}

// civetweb's threads need no capability, but to bind a port below 1024.
CapabilitySet WebThreadCapabilities(const std::string& listen_address) {
  const int port = std::atoi(listen_address.substr(listen_address.rfind(':') + 1).c_str());
  return port < 1024 ? CapabilitySet::Of({CAP_NET_BIND_SERVICE}) : CapabilitySet();
}

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}
}  // namespace

void BlockDaemonSignals() {
  sigset_t set = DaemonSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A scraper that hangs up mid-response must not kill the daemon.
  signal(SIGPIPE, SIG_IGN);
}

absl::Status ConfigureLogging(const std::string& level) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(fmt::format("unknown log level \"{}\"", level));
  }
  static bool installed = false;
  if (!installed) {
    auto logger = std::make_shared<spdlog::logger>(
        "kpathd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    spdlog::set_default_logger(logger);
    installed = true;
  }
  // Under systemd, journald stamps every line already, and files it at the "<N>" priority.
  spdlog::set_formatter(StderrLogFormatter(IsJournalStream(STDERR_FILENO)));
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::trace);
  return absl::OkStatus();
}

Daemon::Daemon(CliOptions cli, Config config) : cli_(std::move(cli)), config_(std::move(config)) {}

Daemon::~Daemon() = default;

int Daemon::Run() {
  // civetweb's threads start from a thread without capabilities: a flaw in its HTTP or TLS code
  // would reach uid 0 with none of kpathd's privileges.
  stale_after_ = SnapshotStaleAfter(ToChrono(config_.sampling_interval)).count();
  // Ready once the first snapshot is published (the probes started, capabilities dropped) and
  // while the last one is fresh.
  ReadinessCheck readiness = [this] {
    return SnapshotNotReadyReason(snapshot_->PublishedAt(), std::chrono::steady_clock::now(),
                                  std::chrono::steady_clock::duration(stale_after_.load()));
  };
  // Without journald, events are lines of the log (at info, whatever log_level says), formatted
  // as every other line: the "<N>" priority or the timestamp.
  events_ = std::make_unique<EventLog>(
      EventLogOptions{.output = ChooseEventOutput(IsJournalStream(STDERR_FILENO)),
                      .write_line = [](const std::string& line) {
                        const spdlog::details::log_msg msg(spdlog::source_loc{}, "kpathd",
                                                           spdlog::level::info, line);
                        for (const spdlog::sink_ptr& sink : spdlog::default_logger()->sinks())
                          sink->log(msg);
                      }});
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      RunOnThreadLimitedTo(WebThreadCapabilities(config_.listen_address), [&] {
        return MetricsServer::Start(config_.listen_address, config_.web, snapshot_, readiness,
                                    &events_->ring());
      });
  if (!server.ok()) {
    spdlog::critical("{}", std::string(server.status().message()));
    return server.status().code() == absl::StatusCode::kUnavailable ? 1 : 2;
  }
  metrics_server_ = *std::move(server);
  spdlog::info("/metrics and /events: {}; events also to {}", metrics_server_->SecuritySummary(),
               EventOutputName(events_->output()));

  const std::set<int> tracing_mounts = TracingMountIds();
  kernel_ = KernelFeaturesFor(config_);
  collectors_ = BuildCollectorSet(config_, kernel_.get());
  collectors_->SetEventSink(events_.get());
  collectors_->SetSelfTestInterval(absl::ToChronoMilliseconds(config_.selftest_interval));
  collectors_->StartAll();
  // Every probe is loaded: the BTF that chose their mechanisms is not needed until a restart.
  if (auto* live = dynamic_cast<LiveKernelFeatures*>(kernel_.get())) live->ReleaseBtf();
  // The first snapshot is served once the capabilities not needed from now on are gone: whoever
  // sees it (a scraper, the tests) sees the steady state that READY=1 announces. (Collected
  // before the drop, as start is still under way.)
  auto first = Collect();
  DropToSteadyState(SteadyWork(tracing_mounts));
  snapshot_->Publish(std::move(first));
  std::string status = collectors_->StatusLine();
  notifier_.Ready(status);
  spdlog::info("ready, serving {}: {}", metrics_server_->Url(), status);

  std::thread sampler([this] { SamplerLoop(); });

  sigset_t signals = DaemonSignals();
  for (;;) {
    siginfo_t info;
    int sig = sigwaitinfo(&signals, &info);
    if (sig < 0) continue;  // EINTR
    if (sig == SIGHUP) {
      // Answered only when a reload client (kpathd --reload) asked: see reload_request.h.
      Reload(IsReloadRequest(info) ? std::optional<pid_t>(info.si_pid) : std::nullopt);
      continue;
    }
    spdlog::info("{}: detaching probes and exiting", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }

  notifier_.Stopping();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  sampler.join();
  // Probes first: nothing of kpathd's stays attached however long the HTTP side takes.
  collectors_->StopAll();
  metrics_server_.reset();
  spdlog::info("stopped");
  return 0;
}

MetricFamilies Daemon::Collect() {
  MetricFamilies families = collectors_->CollectAll();
  events_->AppendFamilies(families);
  return families;
}

SteadyStateWork Daemon::SteadyWork(const std::set<int>& tracing_mounts_before) const {
  SteadyStateWork work;
  collectors_->ForEach([&](const Collector& collector) {
    const CollectorRow* row = FindCollectorRow(collector.Name());
    static const CollectorNeeds kNone;
    const CollectorNeeds& needs = row != nullptr ? row->needs : kNone;
    work.foreign_bpf_inventory |= needs.foreign_bpf_inventory && config_.bpf_enabled;
    for (const ProbeState& probe : collector.Probes()) {
      // CollectorSet retries a BPF probe that did not attach, and restarts one that fails.
      work.reattaches_probes |= !probe.excluded_by_config;
      if (probe.mechanism == Mechanism::kNone) continue;
      work.bpf_maps = true;
      work.names_kernel_addresses |= needs.names_kernel_addresses;
      work.perf_event_timers |= needs.perf_event_timers == probe.mechanism;
    }
  });
  work.kallsyms_path = HostPaths(config_.procfs_root, config_.sysfs_root).Proc("kallsyms").string();
  for (int id : TracingMountIds()) work.mounted_tracing_fs |= !tracing_mounts_before.contains(id);
  return work;
}

void Daemon::Reload(std::optional<pid_t> requester) {
  // Refused, or done here on the main thread: systemd and the client hear it at once.
  auto done = [&](bool applied) {
    notifier_.ReloadDone(collectors_->StatusLine());
    if (requester) AnswerReloadRequest(*requester, applied);
  };
  if (!cli_.config_path) {
    if (config_.web.config_file.empty()) {
      spdlog::info("SIGHUP: running on built-in defaults (no --config), nothing to reload");
      if (requester) AnswerReloadRequest(*requester, false);
      return;
    }
    notifier_.Reloading();
    if (absl::Status web = metrics_server_->Reload(config_.web); !web.ok()) {
      spdlog::error("SIGHUP: web configuration refused, the running one stays in force: {}",
                    std::string(web.message()));
      done(false);
    } else {
      spdlog::info("SIGHUP: web configuration reloaded from {}", config_.web.config_file);
      done(true);
    }
    return;
  }
  notifier_.Reloading();
  absl::StatusOr<Config> next = LoadConfigFile(*cli_.config_path);
  absl::Status applied = next.ok() ? ApplyCommandLine(cli_, *next) : next.status();
  if (!applied.ok()) {
    spdlog::error("SIGHUP: configuration refused, the running one stays in force: {}",
                  std::string(applied.message()));
    done(false);
    return;
  }
  // What is bound or attached at start stays until a restart.
  auto restart_only = [&](bool changed, std::string_view key) {
    if (changed) spdlog::warn("SIGHUP: {} changed; it takes effect on restart", key);
  };
  restart_only(next->listen_address != config_.listen_address, "listen_address");
  restart_only(next->web.max_connections != config_.web.max_connections ||
                   next->web.request_timeout != config_.web.request_timeout ||
                   next->web.keep_alive_timeout != config_.web.keep_alive_timeout,
               "web.max_connections, web.request_timeout and web.keep_alive_timeout");
  next->web.max_connections = config_.web.max_connections;
  next->web.request_timeout = config_.web.request_timeout;
  next->web.keep_alive_timeout = config_.web.keep_alive_timeout;
  // The web configuration file is re-read; refused with the rest if it does not validate.
  if (absl::Status web = metrics_server_->Reload(next->web); !web.ok()) {
    spdlog::error("SIGHUP: configuration refused, the running one stays in force: {}",
                  std::string(web.message()));
    done(false);
    return;
  }
  restart_only(next->procfs_root != config_.procfs_root || next->sysfs_root != config_.sysfs_root,
               "paths");
  restart_only(next->bpf_enabled != config_.bpf_enabled, "bpf.enabled");
  restart_only(next->probes != config_.probes, "probes");
  restart_only(next->hooks != config_.hooks, "hooks");
  next->hooks = config_.hooks;
  // Compiled into the BPF programs when they load.
  restart_only(next->irqoff != config_.irqoff, "irqoff");
  next->irqoff = config_.irqoff;
  next->listen_address = config_.listen_address;
  next->procfs_root = config_.procfs_root;
  next->sysfs_root = config_.sysfs_root;
  next->bpf_enabled = config_.bpf_enabled;
  next->probes = config_.probes;

  if (absl::Status s = ConfigureLogging(next->log_level); !s.ok())
    spdlog::error("{}", std::string(s.message()));
  config_ = *next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = *next;
    // Answered by the sampler once it has applied the configuration.
    if (requester) reload_requesters_.push_back(*requester);
  }
  wake_.notify_all();
  spdlog::info("SIGHUP: configuration reloaded from {}", *cli_.config_path);
}

void Daemon::SamplerLoop() {
  using Clock = std::chrono::steady_clock;
  Clock::duration interval = ToChrono(config_.sampling_interval);
  // Zero: systemd asked for no watchdog pings.
  const Clock::duration ping =
      notifier_.WatchdogPingInterval().value_or(std::chrono::microseconds::zero());
  const bool pinging = ping > Clock::duration::zero();
  Clock::time_point next_sample = Clock::now() + interval;
  Clock::time_point next_ping = Clock::now();

  for (;;) {
    std::optional<Config> reload;
    std::vector<pid_t> requesters;
    {
      std::unique_lock<std::mutex> lock(mu_);
      Clock::time_point deadline = pinging ? std::min(next_sample, next_ping) : next_sample;
      wake_.wait_until(lock, deadline, [&] { return stop_ || pending_.has_value(); });
      if (stop_) return;
      reload.swap(pending_);
      requesters.swap(reload_requesters_);
    }
    Clock::time_point now = Clock::now();
    if (reload) {
      interval = ToChrono(reload->sampling_interval);
      stale_after_ = SnapshotStaleAfter(interval).count();
      next_sample = now + interval;
      collectors_->ForEach([&](Collector& collector) { ReloadCollector(collector, *reload); });
      collectors_->SetLabelLimits(reload->labels);
      collectors_->SetSelfTestInterval(absl::ToChronoMilliseconds(reload->selftest_interval));
      notifier_.ReloadDone(collectors_->StatusLine());
      for (pid_t requester : requesters) AnswerReloadRequest(requester, true);
    }
    if (now >= next_sample) {
      snapshot_->Publish(Collect());
      std::string status = collectors_->StatusLine();
      notifier_.Status(status);
      spdlog::debug("collected: {}", status);
      next_sample += interval;
      if (next_sample <= now) next_sample = now + interval;  // fell behind: skip, don't burst
    }
    // Pinged from this thread only: if collection hangs, the pings stop and systemd restarts us.
    if (pinging && now >= next_ping) {
      notifier_.WatchdogPing();
      next_ping = now + ping;
    }
  }
}

}  // namespace kpath
