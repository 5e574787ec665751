// kpath-bench-event-storm: is the event ring's memory bounded, and does a storm of events slow
// /metrics? Runs kpathd's own pieces in one process: the EventLog (ring, counters, the
// rate-limited log-line output, here to /dev/null) and the MetricsServer (civetweb, /metrics and
// /events) serving a snapshot of about as many series as a busy host's. Three phases, in the
// same run, while one client scrapes /metrics every 100 ms and another follows /events
// (format=lines, since=next_since) every second, as `kpathd events --follow` does:
//   baseline  no events, no load;
//   storm     `--rate` events a second for `--seconds`, each an IRQ-off region with a 32-frame
//             stack, made and emitted by a producer thread;
//   load      the same producer making the same events at the same rate and dropping them
//             instead of emitting them, padded with a busy loop to the storm producer's CPU time
//             a second: an equal CPU load that produces no events.
// On a machine with few CPUs the producer takes CPU time from the scrapes whatever it does;
// storm / load is the cost of the event path itself (EventLog::Emit, the ring, /events).
// Prints resident memory, scrape latency and CPU time, and their ratios.
//
//   kpath-bench-event-storm [--rate 100000] [--seconds 60] [--baseline-seconds 20] [--port P]
//                           [--no-follower]
#include <fcntl.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/events/event_json.h"
#include "daemon/events/event_log.h"
#include "daemon/events/events_client.h"
#include "daemon/snapshot.h"
#include "daemon/web/metrics_server.h"

namespace {

using Clock = std::chrono::steady_clock;

double RssMiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// ~2000 series in 40 families: a busy host's /metrics (bench/README.md, "Serving").
kpath::MetricFamilies HostLikeFamilies() {
  kpath::MetricFamilies out;
  for (int f = 0; f < 40; ++f) {
    kpath::FamilyBuilder family("kpath_bench_family_" + std::to_string(f) + "_total",
                                "A family of the benchmark.", prometheus::MetricType::Counter);
    for (int s = 0; s < 50; ++s) {
      family.Add(
          {{"comm", "process-" + std::to_string(s)}, {"caller", "function_" + std::to_string(f)}},
          s * 1000.0 + f);
    }
    family.AppendTo(out);
  }
  return out;
}

kpath::Event Region(uint64_t n) {
  std::vector<std::string> stack;
  for (int i = 0; i < 32; ++i) stack.push_back("kernel_function_" + std::to_string(i) + "+0x1a");
  const int cpu = static_cast<int>(n % 64);
  return kpath::Event{"irqoff_region",
                      absl::Now(),
                      "IRQs off 12.0 ms on CPU " + std::to_string(cpu) + " in storm (pid 4242)",
                      {{"seconds", 0.012},
                       {"cpu", int64_t{cpu}},
                       {"pid", int64_t{4242}},
                       {"comm", std::string("storm")},
                       {"culprit", std::string("kernel_function_3")},
                       {"stack", std::move(stack)}}};
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Figures {
  std::vector<double> scrape_ms;
  std::vector<double> rss_mib;  // one a second
  double follow_events = 0;
  double follow_missed = 0;
  double follow_replies = 0;
  double follow_max_bytes = 0;         // the largest reply's events, the header aside
  double producer_cpu_per_second = 0;  // the producer thread's CPU seconds a second
  double process_cpu_per_second = 0;   // the whole process's (server, clients, producer)
  double produced_per_second = 0;      // events made (and emitted or dropped) a second
};

enum class Produce { kNothing, kEvents, kLoad };

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double Mean(const std::vector<double>& v, size_t from, size_t to) {
  double sum = 0;
  size_t n = 0;
  for (size_t i = from; i < std::min(to, v.size()); ++i, ++n) sum += v[i];
  return n ? sum / static_cast<double>(n) : 0;
}

// One phase: scrapes, follows /events and samples RSS for `seconds`, while the producer makes
// `rate` events a second and emits them (kEvents) or drops them and busy-loops until its CPU time
// is `load_cpu_per_second` a second of the phase (kLoad).
// The follower reads on from `since` (the seq it got to in the phase before) unless `follow` is
// false.
Figures Phase(const kpath::EventsUrl& url, int seconds, Produce produce, double rate,
              kpath::EventLog& log, std::string& since, bool follow,
              double load_cpu_per_second = 0) {
  Figures fig;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> produced{0};
  std::atomic<double> producer_cpu{0};
  const double process_cpu0 = ProcessCpuSeconds();
  std::thread producer([&] {
    if (produce == Produce::kNothing) return;
    const double cpu0 = ThreadCpuSeconds();
    const auto start = Clock::now();
    uint64_t n = 0;
    while (!done) {
      // Pace in 1 ms batches.
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      const double due = elapsed * rate;
      while (static_cast<double>(n) < due && !done) {
        kpath::Event event = Region(n++);
        if (produce == Produce::kEvents) log.Emit(std::move(event));
      }
      if (produce == Produce::kLoad) {
        const double target = cpu0 + load_cpu_per_second * (elapsed + 0.001);
        while (ThreadCpuSeconds() < target && !done) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    produced = n;
    producer_cpu = ThreadCpuSeconds() - cpu0;
  });
  std::thread follower([&] {
    while (follow && !done) {
      // One reply a second from where it got to, as `kpathd events --follow` reads once it has
      // caught up (the same function).
      absl::StatusOr<std::string> next = kpath::ReadEvents(
          url, {}, since, "",
          [&](const kpath::EventsPage& page) {
            fig.follow_missed += std::stod(kpath::JsonField(page.header, "missed").value_or("0"));
            fig.follow_events +=
                static_cast<double>(std::count(page.lines.begin(), page.lines.end(), '\n'));
            fig.follow_replies += 1;
            fig.follow_max_bytes =
                std::max(fig.follow_max_bytes, static_cast<double>(page.lines.size()));
          },
          /*max_replies=*/1);
      if (next.ok()) since = *next;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  const auto start = Clock::now();
  auto next_rss = start;
  while (Clock::now() - start < std::chrono::seconds(seconds)) {
    if (Clock::now() >= next_rss) {
      fig.rss_mib.push_back(RssMiB());
      next_rss += std::chrono::seconds(1);
    }
    const auto t0 = Clock::now();
    absl::StatusOr<kpath::HttpReply> r = kpath::HttpGet(url, "/metrics", std::chrono::seconds(10));
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r.ok() && r->status == 200) fig.scrape_ms.push_back(ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  done = true;
  producer.join();
  follower.join();
  fig.producer_cpu_per_second = producer_cpu.load() / seconds;
  fig.produced_per_second = static_cast<double>(produced.load()) / seconds;
  fig.process_cpu_per_second = (ProcessCpuSeconds() - process_cpu0) / seconds;
  if (produce != Produce::kNothing) {
    std::printf("  %s %.0f events, %.0f/s\n",
                produce == Produce::kEvents ? "produced and emitted" : "produced and dropped",
                static_cast<double>(produced.load()),
                static_cast<double>(produced.load()) / seconds);
  }
  return fig;
}

void Print(const char* name, const Figures& f) {
  std::printf(
      "  %s: %zu scrapes, latency p50 %.2f ms, p99 %.2f ms; RSS first 10 s %.1f MiB, "
      "last 10 s %.1f MiB, max %.1f MiB; /events follower read %.0f events (largest reply "
      "%.0f KiB of %.0f), missed %.0f; CPU "
      "s/s: producer %.2f, process %.2f\n",
      name, f.scrape_ms.size(), Percentile(f.scrape_ms, 0.5), Percentile(f.scrape_ms, 0.99),
      Mean(f.rss_mib, 0, 10),
      Mean(f.rss_mib, f.rss_mib.size() - std::min<size_t>(10, f.rss_mib.size()), f.rss_mib.size()),
      f.rss_mib.empty() ? 0 : *std::max_element(f.rss_mib.begin(), f.rss_mib.end()),
      f.follow_events, f.follow_max_bytes / 1024, f.follow_replies, f.follow_missed,
      f.producer_cpu_per_second, f.process_cpu_per_second);
}

}  // namespace

int main(int argc, char** argv) {
  // As kpathd's main(): the same allocator settings, so the memory figures are kpathd's.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_ARENA_MAX, 1);
  double rate = 100000;
  int seconds = 60, baseline_seconds = 20, port = 19477;
  bool follow = true;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--no-follower") {  // no /events reader: what the ring alone costs the scrapes
      follow = false;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", argv[i]);
      return 2;
    }
    if (a == "--rate")
      rate = std::atof(argv[i + 1]);
    else if (a == "--seconds")
      seconds = std::atoi(argv[i + 1]);
    else if (a == "--baseline-seconds")
      baseline_seconds = std::atoi(argv[i + 1]);
    else if (a == "--port")
      port = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  kpath::EventLog log(kpath::EventLogOptions{.output = kpath::EventOutput::kJsonLines,
                                             .write_line = [null_fd](const std::string& line) {
                                               const std::string text = line + "\n";
                                               if (write(null_fd, text.data(), text.size()) < 0)
                                                 std::perror("write /dev/null");
                                             }});
  auto snapshot = std::make_shared<kpath::Snapshot>();
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  absl::StatusOr<std::unique_ptr<kpath::MetricsServer>> server =
      kpath::MetricsServer::Start(listen, kpath::WebServerConfig{}, snapshot, {}, &log.ring());
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::atomic<bool> stop{false};
  // The sampler: a new snapshot (with the event counters) every 5 s, as the daemon's.
  std::thread sampler([&] {
    while (!stop) {
      kpath::MetricFamilies families = HostLikeFamilies();
      log.AppendFamilies(families);
      snapshot->Publish(std::move(families));
      for (int i = 0; i < 50 && !stop; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kpath::EventsUrl url = kpath::DefaultEventsUrl(listen);
  std::printf("event storm: %.0f events/s for %d s, baseline %d s (ring: %zu events or %zu MiB)\n",
              rate, seconds, baseline_seconds, kpath::EventLogOptions{}.max_events,
              kpath::EventLogOptions{}.max_bytes >> 20);
  std::string since = "0";
  Figures base = Phase(url, baseline_seconds, Produce::kNothing, 0, log, since, follow);
  Print("baseline", base);
  Figures storm = Phase(url, seconds, Produce::kEvents, rate, log, since, follow);
  Print("storm", storm);
  // The same CPU load without events: as many events a second as the storm made (a busy machine
  // may not let it make --rate), dropped, the producer padded to the storm's CPU time a second.
  Figures load = Phase(url, seconds, Produce::kLoad, storm.produced_per_second, log, since, follow,
                       storm.producer_cpu_per_second);
  Print("load (equal CPU, no events)", load);
  const size_t n = storm.rss_mib.size();
  const double rss_first = Mean(storm.rss_mib, 0, 10);
  const double rss_last = Mean(storm.rss_mib, n - std::min<size_t>(10, n), n);
  std::printf(
      "ratios (storm / baseline): scrape p50 %.2f, p99 %.2f; RSS last 10 s / first 10 s "
      "of the storm %.3f; RSS max of the storm / baseline %.2f\n",
      Percentile(storm.scrape_ms, 0.5) / Percentile(base.scrape_ms, 0.5),
      Percentile(storm.scrape_ms, 0.99) / Percentile(base.scrape_ms, 0.99), rss_last / rss_first,
      *std::max_element(storm.rss_mib.begin(), storm.rss_mib.end()) /
          Mean(base.rss_mib, 0, base.rss_mib.size()));
  std::printf(
      "ratios (storm / load, the event path's own cost): scrape p50 %.2f, p99 %.2f; "
      "(load / baseline, the CPU contention): p50 %.2f, p99 %.2f; producer CPU storm / load "
      "%.2f\n",
      Percentile(storm.scrape_ms, 0.5) / Percentile(load.scrape_ms, 0.5),
      Percentile(storm.scrape_ms, 0.99) / Percentile(load.scrape_ms, 0.99),
      Percentile(load.scrape_ms, 0.5) / Percentile(base.scrape_ms, 0.5),
      Percentile(load.scrape_ms, 0.99) / Percentile(base.scrape_ms, 0.99),
      storm.producer_cpu_per_second / std::max(load.producer_cpu_per_second, 1e-9));
  std::printf("ring at the end: %zu events, %.2f MiB (estimated), %llu overwritten\n",
              log.ring().size(), static_cast<double>(log.ring().bytes()) / (1 << 20),
              static_cast<unsigned long long>(log.ring().dropped()));
  stop = true;
  sampler.join();
  server->reset();
  return 0;
}
