// `kpathd diagnose` on the host: start the collectors, watch for the given time (or until
// SIGINT/SIGTERM) with a progress line on a terminal, then print the report.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "daemon/collector_registry.h"
#include "daemon/collector_set.h"
#include "daemon/daemon.h"
#include "daemon/diagnose/rule.h"
#include "daemon/events/event_json.h"
#include "daemon/events/event_log.h"
#include "daemon/events/events_client.h"
#include "probes/cgroups/cgroups_metrics.h"
#include "probes/irqoff/irqoff_metrics.h"
#include "probes/procfs/procfs_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

using diagnose::Bytes;
using diagnose::Samples;
using diagnose::SumBy;
using diagnose::Total;

namespace {

// The running kpathd's events of `kind` since `since` (empty: every one kept), one JSON line
// each; an error when none answers at `url`.
absl::StatusOr<std::vector<std::string>> DaemonEvents(const EventsUrl& url, const EventsTls& tls,
                                                      std::string_view kind,
                                                      std::string_view since) {
  std::vector<std::string> lines;
  absl::StatusOr<std::string> read = ReadEvents(
      url, tls, since, kind,
      [&](const EventsPage& page) {
        std::string_view body = page.lines;
        while (!body.empty()) {
          const size_t end = body.find('\n');
          if (end > 0) lines.emplace_back(body.substr(0, end));
          body.remove_prefix(end == std::string_view::npos ? body.size() : end + 1);
        }
      },
      SIZE_MAX, std::chrono::seconds(5));
  if (!read.ok()) return read.status();
  return lines;
}

// Events for the report: the running kpathd's IRQ-off regions of the last hour and every hook
// event it kept (since it started, at boot for the service), or, when it cannot be read (none
// answers where the configuration or --url says, or it refuses), those of the watch and why.
void TakeEvents(const absl::StatusOr<EventsTarget>& target, const EventRing& watched,
                Observation& o) {
  std::vector<std::string> lines;
  absl::Status status = target.status();
  const std::pair<std::string_view, std::string_view> queries[] = {
      {event_kind::kIrqOffRegion, "1h"},
      {event_kind::kHookAppeared, ""},
      {event_kind::kHookLeft, ""}};
  for (const auto& [kind, since] : queries) {
    if (!status.ok()) break;
    absl::StatusOr<std::vector<std::string>> got =
        DaemonEvents(target->url, target->tls, kind, since);
    if (!got.ok()) {
      status = got.status();
      break;
    }
    lines.insert(lines.end(), got->begin(), got->end());
  }
  if (status.ok()) {
    o.events = std::move(lines);
    o.events_source = fmt::format(
        "the running kpathd's events ({}://{}:{}/events; IRQ-off regions of the "
        "last hour)",
        target->url.tls ? "https" : "http", target->url.host, target->url.port);
    return;
  }
  const std::string why = target.ok() ? target->Explain(status) : std::string(status.message());
  if (NothingListening(status)) {
    // A host without the service: the watch's own events are all there is.
    spdlog::info("diagnose: no events from a running kpathd ({}); reporting the watch's", why);
    o.events_source = "this watch (no kpathd answered at the configured listen_address)";
  } else {
    // A kpathd that refused: its history (the last hour's regions, hooks seen since boot) is
    // missing from the report, and the person running it should know why.
    spdlog::warn(
        "diagnose: the running kpathd's events could not be read ({}); reporting the "
        "watch's",
        why);
    o.events_source = fmt::format("this watch (the running kpathd's could not be read: {})", why);
  }
  for (const auto& event : watched.After(0, watched.size()).events) {
    o.events.push_back(EventJson(*event));
  }
}

}  // namespace

int RunDiagnose(const CliOptions& cli, Config config) {
  // The report is the output; probe attachment lines are for --log-level info.
  if (!cli.log_level) (void)ConfigureLogging("warn");
  if (geteuid() != 0) {
    std::fprintf(stderr,
                 "kpathd diagnose: not running as root: BPF probes will not attach and most "
                 "pathologies cannot be checked.\n");
  }
  // (SIGPIPE is ignored already, by main's BlockDaemonSignals: a kpathd that closes a TLS
  // connection, a client certificate refused, is a reason in the report, not a SIGPIPE.)
  // Where the running kpathd's events come from, checked before the watch: a mistyped --user or
  // --url is an error now, not a report without them 30 s later.
  const absl::StatusOr<EventsTarget> target = ResolveEventsTarget(cli, config);
  if (!target.ok() && cli.EventsClientOptionsGiven()) {
    std::fprintf(stderr, "kpathd diagnose: %s\n", std::string(target.status().message()).c_str());
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  const bool tty = isatty(STDERR_FILENO) == 1;
  std::unique_ptr<KernelFeatures> kernel = KernelFeaturesFor(config);
  std::unique_ptr<CollectorSet> collectors = BuildCollectorSet(config, kernel.get());
  // The watch's own events, kept for the report (not written anywhere).
  EventLog events(EventLogOptions{.output = EventOutput::kNone});
  collectors->SetEventSink(&events);
  collectors->StartAll();

  Observation o;
  o.cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const Clock::time_point start = Clock::now();
  o.first = collectors->CollectAll();
  auto irqoff_max = [](const MetricFamilies& families) {
    return Samples(families).Value(irqoff_metrics::kMaxSeconds).value_or(0);
  };
  o.irqoff_max_seconds = irqoff_max(o.first);
  const Samples first(o.first);
  const double first_percpu = first.Value(procfs_metrics::kPercpuBytes).value_or(0);
  const double first_mkdirs = Total(SumBy(first, cgroups_metrics::kCgroupMkdirTotal, {}));
  // From here on everything counts: a script (or a test) may start its workload now.
  spdlog::info("diagnose: watching for {} with {} of {} probes attached",
               absl::FormatDuration(cli.diagnose_duration), collectors->ProbesAttached(),
               collectors->ProbesTotal());

  const auto duration =
      std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(cli.diagnose_duration));
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  MetricFamilies latest = o.first;
  for (;;) {
    Clock::duration left = duration - (Clock::now() - start);
    if (left <= Clock::duration::zero()) break;
    Clock::duration step = std::min<Clock::duration>(left, std::chrono::seconds(1));
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(std::chrono::duration_cast<std::chrono::seconds>(step).count());
    ts.tv_nsec = static_cast<long>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(step % std::chrono::seconds(1))
            .count());
    int sig = sigtimedwait(&stop, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      o.interrupted = true;
    }
    latest = collectors->CollectAll();
    o.irqoff_max_seconds = std::max(o.irqoff_max_seconds, irqoff_max(latest));
    if (o.interrupted) break;
    if (tty) {
      Samples now(latest);
      double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      double percpu = now.Value(procfs_metrics::kPercpuBytes).value_or(0) - first_percpu;
      double mkdirs = Total(SumBy(now, cgroups_metrics::kCgroupMkdirTotal, {})) - first_mkdirs;
      std::fprintf(stderr,
                   "\r\033[Kkpathd diagnose: %.0f of %.0f s, %d/%d probes attached; "
                   "Percpu %s%s, %.0f cgroups created (Ctrl-C: report now)",
                   elapsed, absl::ToDoubleSeconds(cli.diagnose_duration),
                   collectors->ProbesAttached(), collectors->ProbesTotal(), percpu >= 0 ? "+" : "",
                   Bytes(percpu).c_str(), mkdirs);
      std::fflush(stderr);
    }
  }
  if (tty) std::fputs("\r\033[K", stderr);
  o.last = std::move(latest);
  o.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  collectors->StopAll();
  collectors.reset();
  TakeEvents(target, events.ring(), o);

  Diagnosis d = Diagnose(o);
  d.kernel_release = BuildInfo::Current().kernel_release;
  std::string report = cli.diagnose_json ? RenderJson(d) : RenderText(d);
  std::fwrite(report.data(), 1, report.size(), stdout);
  std::fflush(stdout);
  return d.AnythingFound() ? 1 : 0;
}

}  // namespace kpath
