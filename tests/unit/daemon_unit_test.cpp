// The daemon's parts that need no kernel: command line, collector isolation, status line.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <thread>

#include "daemon/cli.h"
#include "daemon/collector_registry.h"
#include "daemon/collector_set.h"
#include "daemon/snapshot.h"

using namespace kpath;

namespace {

absl::StatusOr<CliOptions> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "kpathd");
  return ParseCommandLine(args);
}

class FakeCollector final : public Collector {
 public:
  FakeCollector(std::string name, absl::Status start, absl::Status collect)
      : name_(std::move(name)), start_(start), collect_(collect) {}
  std::string_view Name() const override { return name_; }
  absl::Status Start() override {
    ++starts;
    if (!start_sequence.empty()) {
      absl::Status s = start_sequence.front();
      start_sequence.erase(start_sequence.begin());
      return s;
    }
    return start_;
  }
  absl::Status Collect(MetricFamilies& out) override {
    // A failing collector may have appended half its families: they must not reach the scrape.
    Gauge("kpath_fake_" + name_, "Fake.").Add(1).AppendTo(out);
    if (throws) throw std::runtime_error("boom");
    if (!collect_sequence.empty()) {
      absl::Status s = collect_sequence.front();
      collect_sequence.erase(collect_sequence.begin());
      return s;
    }
    return collect_;
  }
  std::vector<ProbeState> Probes() const override { return probes; }
  std::string StatusFragment() const override { return fragment; }
  std::optional<absl::Status> SelfTest() override {
    ++selftests;
    return selftest;
  }
  std::optional<absl::Status> selftest;  // nullopt: no canary
  int selftests = 0;

  std::vector<ProbeState> probes;
  std::string fragment;
  bool throws = false;
  // Results of the next calls, in order, before falling back to the constructor's.
  std::vector<absl::Status> start_sequence;
  std::vector<absl::Status> collect_sequence;
  int starts = 0;

 private:
  std::string name_;
  absl::Status start_, collect_;
};

bool HasFamily(const MetricFamilies& f, const std::string& name) {
  for (const auto& m : f)
    if (m.name == name) return true;
  return false;
}

double Sample(const MetricFamilies& f, const std::string& name, const std::string& label) {
  for (const auto& m : f) {
    if (m.name != name) continue;
    for (const auto& s : m.metric)
      for (const auto& l : s.label)
        if (l.value == label) return s.gauge.value;
  }
  return -1;
}

}  // namespace

TEST_CASE("command line: flags with separate and inline values", "[cli]") {
  auto o = Parse({"--config", "/etc/k.yaml", "--listen=127.0.0.1:1", "--log-level", "debug"});
  REQUIRE(o.ok());
  CHECK(o->mode == CliOptions::Mode::kRun);
  CHECK(o->config_path == "/etc/k.yaml");
  CHECK(o->listen_address == "127.0.0.1:1");
  CHECK(o->log_level == "debug");
}

TEST_CASE("command line: --check-config, --version, --help", "[cli]") {
  auto c = Parse({"--check-config", "x.yaml"});
  REQUIRE(c.ok());
  CHECK(c->mode == CliOptions::Mode::kCheckConfig);
  CHECK(c->config_path == "x.yaml");
  CHECK(Parse({"--version"})->mode == CliOptions::Mode::kVersion);
  CHECK(Parse({"--help"})->mode == CliOptions::Mode::kHelp);
}

TEST_CASE("command line: unknown flags and missing values are errors", "[cli]") {
  CHECK(Parse({"--nope"}).status().message() == "unknown argument \"--nope\"");
  CHECK(Parse({"--config"}).status().message() == "--config needs a value");
  CHECK(Parse({"--listen="}).status().message() == "--listen needs a value");
}

TEST_CASE("command line: diagnose takes the events client's options, the daemon does not",
          "[cli]") {
  auto d = Parse({"diagnose", "--duration", "5s", "--url", "https://node-7:9477", "--ca-file",
                  "ca.crt", "--cert", "ops.crt", "--key", "ops.key", "--netrc-file", "n"});
  REQUIRE(d.ok());
  CHECK(d->mode == CliOptions::Mode::kDiagnose);
  CHECK(d->events_url == "https://node-7:9477");
  CHECK(d->events_ca_file == "ca.crt");
  CHECK(d->events_cert == "ops.crt");
  CHECK(d->events_key == "ops.key");
  CHECK(d->events_netrc_file == "n");
  CHECK(Parse({"diagnose", "--user=a:b", "-k"})->events_user == "a:b");
  CHECK(Parse({"diagnose", "--user=a:b", "-k"})->events_insecure);
  CHECK(d->EventsClientOptionsGiven());
  CHECK(Parse({"diagnose", "-k"})->EventsClientOptionsGiven());
  CHECK_FALSE(Parse({"diagnose", "--duration", "5s", "--json"})->EventsClientOptionsGiven());
  CHECK(Parse({"diagnose", "--cert", "c"}).status().message() ==
        "--cert and --key go together (a client certificate and its key)");
  CHECK(Parse({"diagnose", "-k", "--ca-file", "c"}).status().message() ==
        "--insecure and --ca-file: pick one");
  CHECK(Parse({"--user", "a:b"}).status().message() == "unknown argument \"--user\"");
  CHECK(Parse({"--url", "http://x"}).status().message() == "unknown argument \"--url\"");
  // events only: what to read and how to print it.
  CHECK(Parse({"diagnose", "--since", "1h"}).status().message() == "unknown argument \"--since\"");
}

TEST_CASE("command-line values are validated like the file's and override it", "[cli]") {
  Config config;
  CliOptions o;
  o.listen_address = "127.0.0.1:9999";
  o.procfs_root = "/host/proc";
  REQUIRE(ApplyCommandLine(o, config).ok());
  CHECK(config.listen_address == "127.0.0.1:9999");
  CHECK(config.procfs_root == "/host/proc");
  CHECK(config.sysfs_root == "/sys");

  CliOptions bad;
  bad.log_level = "loud";
  absl::Status s = ApplyCommandLine(bad, config);
  CHECK_FALSE(s.ok());
  CHECK_THAT(std::string(s.message()), Catch::Contains("command line"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("log_level"));
}

TEST_CASE("a failing collector reports success 0 and drops only its own families",
          "[collector-set]") {
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::make_unique<FakeCollector>("good", absl::OkStatus(), absl::OkStatus()));
  collectors.push_back(
      std::make_unique<FakeCollector>("bad", absl::OkStatus(), absl::DataLossError("garbled")));
  auto thrower = std::make_unique<FakeCollector>("thrower", absl::OkStatus(), absl::OkStatus());
  thrower->throws = true;
  collectors.push_back(std::move(thrower));
  collectors.push_back(std::make_unique<FakeCollector>(
      "unstarted", absl::UnavailableError("no BTF"), absl::OkStatus()));
  CollectorSet set(std::move(collectors), BuildInfo{"v", "r", "1.1", "6.18"},
                   HostPaths("/nonexistent/proc", "/nonexistent/sys"));
  set.StartAll();
  MetricFamilies out = set.CollectAll();
  CHECK(HasFamily(out, "kpath_fake_good"));
  CHECK_FALSE(HasFamily(out, "kpath_fake_bad"));
  CHECK_FALSE(HasFamily(out, "kpath_fake_thrower"));
  CHECK_FALSE(HasFamily(out, "kpath_fake_unstarted"));
  CHECK(Sample(out, "kpath_collector_success", "good") == 1);
  CHECK(Sample(out, "kpath_collector_success", "bad") == 0);
  CHECK(Sample(out, "kpath_collector_success", "thrower") == 0);
  CHECK(Sample(out, "kpath_collector_success", "unstarted") == 0);
  CHECK(HasFamily(out, "kpath_build_info"));
  CHECK(HasFamily(out, "kpath_collector_duration_seconds"));
  CHECK_THAT(set.StatusLine(), Catch::Contains("collectors bad, thrower, unstarted failing"));
}

TEST_CASE("the status line counts attached probes and joins fragments", "[collector-set]") {
  auto a = std::make_unique<FakeCollector>("a", absl::OkStatus(), absl::OkStatus());
  a->probes = {{"pa", Mechanism::kTpBtf, ""}, {"pb", Mechanism::kNone, "no BTF"}};
  a->probes[1].supported = false;
  a->fragment = "Percpu 1.0 MiB";
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::move(a));
  CollectorSet set(std::move(collectors), BuildInfo{}, HostPaths());
  set.StartAll();
  MetricFamilies out = set.CollectAll();
  CHECK(set.StatusLine() == "1/2 probes attached; Percpu 1.0 MiB");
  CHECK(Sample(out, "kpath_probe_attached", "tp_btf") == 1);
  CHECK(Sample(out, "kpath_probe_attached", "none") == 0);
  CHECK(Sample(out, "kpath_probe_supported", "pa") == 1);
  CHECK(Sample(out, "kpath_probe_supported", "pb") == 0);
}

TEST_CASE("every collection is stamped with the wall-clock time it ended", "[collector-set]") {
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::make_unique<FakeCollector>("a", absl::OkStatus(), absl::OkStatus()));
  CollectorSet set(std::move(collectors), BuildInfo{}, HostPaths());
  set.StartAll();
  auto unix_now = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const double before = unix_now();
  MetricFamilies out = set.CollectAll();
  const double after = unix_now();
  std::optional<double> stamp;
  for (const auto& f : out) {
    if (f.name != "kpath_last_sample_timestamp_seconds") continue;
    REQUIRE(f.type == prometheus::MetricType::Gauge);
    REQUIRE(f.metric.size() == 1);
    CHECK(f.metric[0].label.empty());
    stamp = f.metric[0].gauge.value;
  }
  REQUIRE(stamp);
  CHECK(*stamp >= before);
  CHECK(*stamp <= after);
}

TEST_CASE("an attached probe's self-test runs once per interval and is exported",
          "[collector-set]") {
  auto canary = std::make_unique<FakeCollector>("canary", absl::OkStatus(), absl::OkStatus());
  canary->probes = {{"canary", Mechanism::kTpBtf, ""}};
  canary->selftest = absl::OkStatus();
  FakeCollector* fake = canary.get();
  auto plain = std::make_unique<FakeCollector>("plain", absl::OkStatus(), absl::OkStatus());
  plain->probes = {{"plain", Mechanism::kTpBtf, ""}};  // attached, no canary
  auto detached = std::make_unique<FakeCollector>("detached", absl::OkStatus(), absl::OkStatus());
  detached->probes = {{"detached", Mechanism::kNone, "no BTF"}};
  detached->selftest = absl::OkStatus();
  FakeCollector* never = detached.get();
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::move(canary));
  collectors.push_back(std::move(plain));
  collectors.push_back(std::move(detached));
  CollectorSet set(std::move(collectors), BuildInfo{}, HostPaths());
  set.StartAll();

  MetricFamilies out = set.CollectAll();
  CHECK(fake->selftests == 1);
  CHECK(Sample(out, "kpath_probe_selftest_success", "canary") == 1);
  CHECK(Sample(out, "kpath_probe_selftest_success", "plain") == -1);
  CHECK(Sample(out, "kpath_probe_selftest_success", "detached") == -1);
  CHECK(never->selftests == 0);

  // Not again within the interval (a minute by default): the last result stands.
  fake->selftest = absl::NotFoundError("the canary's madvise did not arrive");
  out = set.CollectAll();
  CHECK(fake->selftests == 1);
  CHECK(Sample(out, "kpath_probe_selftest_success", "canary") == 1);

  set.SetSelfTestInterval(std::chrono::milliseconds(0));
  out = set.CollectAll();
  CHECK(fake->selftests == 2);
  CHECK(Sample(out, "kpath_probe_selftest_success", "canary") == 0);

  // Detached: no result until it is attached and tested again.
  fake->probes[0].mechanism = Mechanism::kNone;
  out = set.CollectAll();
  CHECK(Sample(out, "kpath_probe_selftest_success", "canary") == -1);
}

TEST_CASE("a snapshot serves the last published families to every scraper", "[snapshot]") {
  Snapshot snapshot;
  CHECK(snapshot.Collect().empty());
  MetricFamilies f;
  Gauge("kpath_g", "G.").Add(1).AppendTo(f);
  snapshot.Publish(f);
  CHECK(snapshot.Collect().size() == 1);
  CHECK(snapshot.Collect().size() == 1);
  snapshot.Publish({});
  CHECK(snapshot.Collect().empty());
}

TEST_CASE("ready once a snapshot is published, until it is older than three intervals or 15 s",
          "[snapshot]") {
  using std::chrono::seconds;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(SnapshotStaleAfter(seconds(5)) == seconds(15));
  CHECK(SnapshotStaleAfter(seconds(1)) == seconds(15));
  CHECK(SnapshotStaleAfter(seconds(60)) == seconds(180));
  CHECK(SnapshotNotReadyReason(std::nullopt, t0, seconds(15)) ==
        "starting: the probes are being attached, no snapshot served yet");
  CHECK(SnapshotNotReadyReason(t0, t0 + seconds(15), seconds(15)).empty());
  CHECK(SnapshotNotReadyReason(t0, t0 + seconds(42), seconds(15)) ==
        "the snapshot served is 42s old (stale after 15s): collection is stuck");

  Snapshot snapshot;
  CHECK_FALSE(snapshot.PublishedAt());
  snapshot.Publish({});
  REQUIRE(snapshot.PublishedAt());
  CHECK(*snapshot.PublishedAt() >= t0);
  CHECK(*snapshot.PublishedAt() <= std::chrono::steady_clock::now());
}

TEST_CASE("a probe collector that fails to start is retried with backoff until it attaches",
          "[collector-set][retry]") {
  auto probe = std::make_unique<FakeCollector>("probe", absl::OkStatus(), absl::OkStatus());
  probe->probes = {{"p", Mechanism::kTracepoint, ""}};
  probe->start_sequence = {absl::NotFoundError("tracepoint m:e not found"),
                           absl::NotFoundError("tracepoint m:e not found")};
  FakeCollector* fake = probe.get();
  // A /proc sampler that fails to start is not retried: nothing of it can appear later.
  auto sampler =
      std::make_unique<FakeCollector>("sampler", absl::NotFoundError("no file"), absl::OkStatus());
  FakeCollector* fake_sampler = sampler.get();
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::move(probe));
  collectors.push_back(std::move(sampler));
  CollectorSet set(std::move(collectors), BuildInfo{}, HostPaths());
  set.SetRetryPolicy({.initial = std::chrono::milliseconds(30),
                      .max = std::chrono::milliseconds(60),
                      .failures_before_restart = 3});
  set.StartAll();
  CHECK(fake->starts == 1);
  MetricFamilies out = set.CollectAll();  // before the backoff: not retried yet
  CHECK(fake->starts == 1);
  CHECK(Sample(out, "kpath_collector_success", "probe") == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  out = set.CollectAll();  // second attempt, fails; next in 60 ms
  CHECK(fake->starts == 2);
  CHECK(Sample(out, "kpath_collector_success", "probe") == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  set.CollectAll();  // within the doubled backoff
  CHECK(fake->starts == 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  out = set.CollectAll();  // third attempt attaches and collects in the same pass
  CHECK(fake->starts == 3);
  CHECK(Sample(out, "kpath_collector_success", "probe") == 1);
  CHECK(HasFamily(out, "kpath_fake_probe"));
  CHECK(fake_sampler->starts == 1);
  CHECK(Sample(out, "kpath_collector_success", "sampler") == 0);
}

TEST_CASE("a started probe collector failing three collections in a row is re-attached",
          "[collector-set][retry]") {
  auto probe = std::make_unique<FakeCollector>("probe", absl::OkStatus(), absl::OkStatus());
  probe->probes = {{"p", Mechanism::kTpBtf, ""}};
  probe->collect_sequence = {absl::OkStatus(),
                             absl::DataLossError("map read"),
                             absl::DataLossError("map read"),
                             absl::OkStatus(),
                             absl::DataLossError("map read"),
                             absl::DataLossError("map read"),
                             absl::DataLossError("map read")};
  FakeCollector* fake = probe.get();
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::move(probe));
  CollectorSet set(std::move(collectors), BuildInfo{}, HostPaths());
  set.SetRetryPolicy({.initial = std::chrono::milliseconds(0),
                      .max = std::chrono::milliseconds(0),
                      .failures_before_restart = 3});
  set.StartAll();
  for (int i = 0; i < 4; ++i) set.CollectAll();  // ok, fail, fail, ok: the count starts over
  CHECK(fake->starts == 1);
  for (int i = 0; i < 3; ++i) set.CollectAll();  // three failures in a row
  CHECK(fake->starts == 1);
  MetricFamilies out = set.CollectAll();  // re-attached, then collects
  CHECK(fake->starts == 2);
  CHECK(Sample(out, "kpath_collector_success", "probe") == 1);
}

TEST_CASE("collectors are made in registry order, the order of /metrics and STATUS=",
          "[registry]") {
  std::vector<std::string_view> names;
  for (const CollectorRow& row : CollectorRegistry()) names.push_back(row.name);
  CHECK(names == std::vector<std::string_view>{"meminfo", "percpu_alloc", "madvise", "tlb_flush",
                                               "interrupts", "stat", "process", "cgroups",
                                               "cgroup_churn", "irqoff", "slab", "slabinfo_readers",
                                               "foreign_hooks"});
}

TEST_CASE("every probe row's defaults are drawn from its mechanisms, in their order",
          "[registry]") {
  for (const CollectorRow& row : CollectorRegistry()) {
    INFO(row.name);
    if (row.kind == CollectorRow::Kind::kSampler) {
      CHECK(row.mechanisms.empty());
      continue;
    }
    CHECK_FALSE(row.defaults.empty());
    auto next = row.mechanisms.begin();
    for (Mechanism m : row.defaults) {
      next = std::find(next, row.mechanisms.end(), m);
      REQUIRE(next != row.mechanisms.end());
    }
  }
}

TEST_CASE("without BPF only the samplers are made, each under its row's name", "[registry]") {
  Config config;
  config.bpf_enabled = false;
  config.sysfs_root = "/nonexistent/sys";  // nothing is mounted
  const HostPaths paths("/nonexistent/proc", config.sysfs_root);
  LiveKernelFeatures kernel(paths, /*may_mount=*/false);
  const CollectorEnvironment env{paths, &kernel, nullptr};
  auto names = [&] {
    std::vector<std::string_view> out;
    for (const auto& collector : MakeCollectors(config, env)) {
      const CollectorRow* row = FindCollectorRow(collector->Name());
      REQUIRE(row != nullptr);
      out.push_back(row->name);
    }
    return out;
  };
  CHECK(names() == std::vector<std::string_view>{"meminfo", "interrupts", "stat", "process",
                                                 "cgroups", "slab", "foreign_hooks"});
  config.hooks.enabled = false;
  CHECK(names() == std::vector<std::string_view>{"meminfo", "interrupts", "stat", "process",
                                                 "cgroups", "slab"});
}
