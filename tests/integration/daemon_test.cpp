// The real kpathd binary on the real kernel: serving, systemd notify, signals, bad input.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

double MeminfoPercpuBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "Percpu:") return value * 1024;
  }
  return -1;
}

// Program ids kpathd holds, from /proc/PID/fdinfo (bpftool 7.1 does not show owning pids here).
std::set<int> ProgramIdsHeldBy(pid_t pid) {
  std::set<int> ids;
  std::string dir = "/proc/" + std::to_string(pid) + "/fdinfo";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("prog_id:", 0) == 0) ids.insert(std::stoi(line.substr(8)));
    }
  }
  return ids;
}

std::set<int> ProgramIdsListedByBpftool() {
  CommandResult r = RunCommand("bpftool prog show");
  std::set<int> ids;
  std::regex re(R"(^(\d+): )");
  std::istringstream in(r.output);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, re)) ids.insert(std::stoi(m[1]));
  }
  return ids;
}

}  // namespace

TEST_CASE("kpathd serves kpath_percpu_bytes equal to /proc/meminfo Percpu", "[daemon]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 500ms\n"});
  REQUIRE(kpathd.WaitUntilServing());
  // Percpu moves with every allocation, kpathd's own included: its first collection reads
  // /proc/meminfo and then runs the probes' self-tests (a per-CPU array map, a canary cgroup),
  // which can populate new per-CPU pages (24 KiB of 1 MB on Debian 11's 5.10 with 2 CPUs), so a
  // reading taken after a snapshot says nothing exact about it. Instead, two readings bracket a
  // sample: the sampler collects one snapshot at a time, so the second one published after
  // `before` was read began after it, and it ended before `after`. On a quiet host all are equal.
  const double before = MeminfoPercpuBytes();
  auto sample_time = [](const std::optional<std::string>& body) {
    return body ? MetricValue(*body, "kpath_last_sample_timestamp_seconds") : std::nullopt;
  };
  std::optional<std::string> body = kpathd.Scrape();
  REQUIRE(sample_time(body));
  for (int change = 0; change < 2; ++change) {
    const std::optional<double> seen = sample_time(body);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (sample_time(body) == seen && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
      body = kpathd.Scrape();
    }
    REQUIRE(sample_time(body));  // a failed scrape ends the wait too
    REQUIRE(sample_time(body) != seen);
  }
  const double after = MeminfoPercpuBytes();
  auto served = MetricValue(*body, "kpath_percpu_bytes");
  REQUIRE(served);
  INFO("served " << *served << ", /proc/meminfo " << before << " before and " << after
                 << " after the sample");
  CHECK(*served >= std::min(before, after));
  CHECK(*served <= std::max(before, after));
  CHECK(MetricValue(*body, "kpath_meminfo_bytes", {{"field", "Percpu"}}) == served);
  CHECK(MetricValue(*body, "kpath_meminfo_bytes", {{"field", "MemTotal"}}).value_or(0) > 0);
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "meminfo"}}) == 1);
  CHECK(MetricValue(*body, "kpath_build_info").value_or(0) == 1);
}

TEST_CASE("kpathd output passes promtool check metrics without warnings", "[daemon]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({});
  REQUIRE(kpathd.WaitUntilServing());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  CommandResult r = RunCommand("promtool check metrics", *body);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.empty());
}

TEST_CASE("kpathd sends READY=1 after attaching probes, then STATUS= every interval",
          "[daemon][systemd]") {
  REQUIRE(IsRoot());
  NotifySocket notify;
  KpathdProcess kpathd(
      {.args = {},
       .env = {{"NOTIFY_SOCKET", notify.path()}},
       .config_yaml = "sampling_interval: 500ms\nmeminfo:\n  percpu_growth_window: 5s\n"});
  auto ready = notify.WaitFor("READY=1", 20s);
  REQUIRE(ready);
  INFO(*ready);
  // Probes are attached by the time READY=1 is sent, and the first snapshot is being served.
  // Every probe of the default set attaches on this kernel, however many there are (those off
  // by configuration are not counted).
  CHECK(std::regex_search(*ready, std::regex(R"(STATUS=(\d+)/\1 probes attached)")));
  CHECK(ready->find("Percpu ") != std::string::npos);
  auto body = kpathd.Scrape();
  REQUIRE(body);
  CHECK(MetricValue(*body, "kpath_probe_attached", {{"probe", "percpu_alloc"}}) == 1);
  // Then a STATUS= line per interval, with the growth rate once two samples exist.
  auto status = notify.WaitFor("/s", 5s);
  REQUIRE(status);
  CHECK(std::regex_search(
      *status,
      std::regex(
          R"(STATUS=(\d+)/\1 probes attached( \([a-z_, ]+ off by configuration\))?; Percpu [0-9.]+ [KMGT]?i?B [+-][0-9.]+ [KMGT]?i?B/s)")));
}

TEST_CASE("kpathd pings the watchdog when WATCHDOG_USEC is set", "[daemon][systemd]") {
  REQUIRE(IsRoot());
  NotifySocket notify;
  // sd_watchdog_enabled() checks WATCHDOG_PID against the process's own pid, so the test cannot
  // set it before fork; without WATCHDOG_PID any process honours WATCHDOG_USEC.
  KpathdProcess kpathd({.env = {{"NOTIFY_SOCKET", notify.path()}, {"WATCHDOG_USEC", "400000"}}});
  REQUIRE(notify.WaitFor("READY=1", 20s));
  int pings = 0;
  auto deadline = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto m = notify.Receive(500ms);
    if (m && m->find("WATCHDOG=1") != std::string::npos) ++pings;
  }
  // Every 200 ms for 2 s: about 10.
  CHECK(pings >= 5);
}

TEST_CASE("SIGTERM detaches every BPF program and exits 0 within 2 s", "[daemon][signals]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({});
  REQUIRE(kpathd.WaitUntilServing());
  std::set<int> held = ProgramIdsHeldBy(kpathd.pid());
  REQUIRE(!held.empty());
  std::set<int> listed = ProgramIdsListedByBpftool();
  for (int id : held) CHECK(listed.count(id) == 1);

  auto begin = std::chrono::steady_clock::now();
  kpathd.Signal(SIGTERM);
  auto status = kpathd.WaitExit(5s);
  auto took = std::chrono::steady_clock::now() - begin;
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK(took < 2s);
  // The kernel frees a program once its last reference is gone, after an RCU grace period: give
  // it a moment, then every program kpathd held must be gone.
  std::set<int> after;
  for (int i = 0; i < 20; ++i) {
    after = ProgramIdsListedByBpftool();
    bool any = false;
    for (int id : held) any |= after.count(id) > 0;
    if (!any) break;
    std::this_thread::sleep_for(50ms);
  }
  for (int id : held) {
    INFO("program id " << id << " still loaded after SIGTERM");
    CHECK(after.count(id) == 0);
  }
}

TEST_CASE("SIGINT also exits 0", "[daemon][signals]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({});
  REQUIRE(kpathd.WaitUntilServing());
  kpathd.Signal(SIGINT);
  CHECK(kpathd.WaitExit(5s) == 0);
}

TEST_CASE("a port already in use ends kpathd at once with an error naming the address",
          "[daemon][bad-input]") {
  int port = FreePort();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(fd, 1) == 0);
  std::string address = "127.0.0.1:" + std::to_string(port);
  KpathdProcess kpathd({.args = {"--listen", address}, .add_listen = false});
  auto status = kpathd.WaitExit(5s);
  close(fd);
  REQUIRE(status);
  CHECK(*status != 0);
  INFO(kpathd.Output());
  CHECK(kpathd.Output().find("cannot listen on " + address) != std::string::npos);
}

TEST_CASE("SIGHUP applies a valid config and keeps counters, and refuses a broken one",
          "[daemon][signals][config]") {
  REQUIRE(IsRoot());
  NotifySocket notify;
  KpathdProcess kpathd(
      {.env = {{"NOTIFY_SOCKET", notify.path()}}, .config_yaml = "sampling_interval: 10s\n"});
  REQUIRE(notify.WaitFor("READY=1", 20s));
  REQUIRE(kpathd.WaitUntilServing());
  double allocs_before = SumMetric(*kpathd.Scrape(), "kpath_percpu_allocs_total");

  // A broken file: refused, the old configuration keeps serving.
  kpathd.RewriteConfig("sampling_interval: [oops\n");
  kpathd.Signal(SIGHUP);
  std::this_thread::sleep_for(500ms);
  CHECK(kpathd.Running());
  CHECK(kpathd.Output().find("configuration refused") != std::string::npos);
  CHECK(kpathd.Scrape());

  // A valid one: a short interval applies at once, so STATUS= arrives within a second or two.
  kpathd.RewriteConfig("sampling_interval: 200ms\n");
  kpathd.Signal(SIGHUP);
  REQUIRE(notify.WaitFor("RELOADING=1", 5s));
  CHECK(notify.CountFor(std::regex(R"(STATUS=\d+/\d+ probes attached)"), 2s) >= 4);
  // Counters live in the kernel maps: a reload does not reset them.
  double allocs_after = SumMetric(*kpathd.Scrape(), "kpath_percpu_allocs_total");
  CHECK(allocs_after >= allocs_before);
  CHECK(kpathd.Output().find("configuration reloaded") != std::string::npos);
}

TEST_CASE("under journald every line carries its syslog priority", "[daemon][systemd][log]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 10s\n", .journal_stream = true});
  REQUIRE(kpathd.WaitUntilServing());
  REQUIRE(kpathd.WaitForOutput("<6>info: ready, serving"));
  // A warning: a restart-only key changed on reload.
  kpathd.RewriteConfig("sampling_interval: 10s\nbpf:\n  enabled: false\n");
  kpathd.Signal(SIGHUP);
  CHECK(kpathd.WaitForOutput("<4>warning: SIGHUP: bpf.enabled changed"));
  // An error: a file that does not parse.
  kpathd.RewriteConfig("sampling_interval: [oops\n");
  kpathd.Signal(SIGHUP);
  CHECK(kpathd.WaitForOutput("<3>error: SIGHUP: configuration refused"));
  // Critical: a second kpathd cannot bind the port.
  const std::string address = "127.0.0.1:" + std::to_string(kpathd.port());
  KpathdProcess second(
      {.args = {"--listen", address}, .add_listen = false, .journal_stream = true});
  REQUIRE(second.WaitExit(10s));
  INFO(second.Output());
  CHECK(second.Output().find("\n<2>critical: cannot listen on " + address) != std::string::npos);
  kpathd.Signal(SIGTERM);
  REQUIRE(kpathd.WaitExit(5s) == 0);
  // Every line, libbpf's and civetweb's included, has a priority journald reads, and no
  // timestamp of its own (journald stamps it).
  std::istringstream lines(kpathd.Output());
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    INFO(line);
    CHECK(std::regex_search(line,
                            std::regex(R"(^<[2-7]>(critical|error|warning|info|debug|trace): )")));
  }
  CHECK(count >= 5);
}

TEST_CASE("a fatal error reaches journald as an error, and a bad file at start names file and line",
          "[daemon][systemd][log][bad-input]") {
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 10s\nno_such_key: 1\n",
                        .add_listen = false,
                        .journal_stream = true});
  REQUIRE(kpathd.WaitExit(5s) == 2);
  INFO(kpathd.Output());
  CHECK(kpathd.Output().rfind(
            "<3>kpathd: " + kpathd.config_path().string() + ":2: unknown key \"no_such_key\"", 0) ==
        0);
}

TEST_CASE("with JOURNAL_STREAM naming another file, stderr lines keep their timestamps",
          "[daemon][systemd][log]") {
  REQUIRE(IsRoot());
  // Under systemd, but with stderr redirected elsewhere (kpathd ... 2>file).
  KpathdProcess kpathd({.env = {{"JOURNAL_STREAM", "1:1"}}});
  REQUIRE(kpathd.WaitUntilServing());
  REQUIRE(kpathd.WaitForOutput("info: ready, serving"));
  std::istringstream lines(kpathd.Output());
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK(
        std::regex_search(line, std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} [a-z]+: )")));
  }
}

TEST_CASE("a garbled /proc/meminfo marks only the meminfo collector failed",
          "[daemon][bad-input]") {
  REQUIRE(IsRoot());
  // A procfs root whose meminfo has a non-number where a value belongs.
  KpathdProcess kpathd({.args = {"--procfs-root", std::string(KPATH_FIXTURES) +
                                                      "/garbled/meminfo-not-a-number/proc"}});
  REQUIRE(kpathd.WaitUntilServing());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "meminfo"}}) == 0);
  CHECK_FALSE(MetricValue(*body, "kpath_percpu_bytes"));
  // The BPF probe reads the real kernel and keeps working.
  CHECK(MetricValue(*body, "kpath_collector_success", {{"collector", "percpu_alloc"}}) == 1);
  CHECK(kpathd.Running());
}

TEST_CASE(
    "kpathd --check-config exits 0 for a valid file and 1 naming file, line and key otherwise",
    "[daemon][config]") {
  std::string shipped = std::string(KPATH_SOURCE_DIR) + "/config/kpathd.yaml";
  CommandResult ok = RunCommand(KpathdBinary() + " --check-config " + shipped);
  INFO(ok.output);
  CHECK(ok.status == 0);

  char path[] = "/tmp/kpathd-check-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  std::string bad = "log_level: info\nsampling_interval: 5s\nno_such_key: 1\n";
  REQUIRE(write(fd, bad.data(), bad.size()) == static_cast<ssize_t>(bad.size()));
  close(fd);
  CommandResult r = RunCommand(KpathdBinary() + " --check-config " + path);
  unlink(path);
  CHECK(r.status == 1);
  CHECK(r.output.find(std::string(path) + ":3: unknown key \"no_such_key\"") != std::string::npos);
}

TEST_CASE("kpathd --version prints the version, and an unknown argument exits 2", "[daemon][cli]") {
  CommandResult v = RunCommand(KpathdBinary() + " --version");
  CHECK(v.status == 0);
  CHECK(v.output.rfind("kpathd ", 0) == 0);
  CommandResult bad = RunCommand(KpathdBinary() + " --no-such-flag");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("unknown argument \"--no-such-flag\"") != std::string::npos);
}

TEST_CASE("kill -9 leaves no BPF program or pin behind, and a restart attaches cleanly",
          "[daemon][signals]") {
  REQUIRE(IsRoot());
  // tracefs and debugfs mount points: kill -9 leaves kpathd no chance to unmount what it mounted
  // where nothing was (under systemd the unit's own mount namespace goes with it); the test does.
  const std::vector<std::string> mounts_before = TraceMounts();
  KpathdProcess first({});
  REQUIRE(first.WaitUntilServing());
  const std::set<int> held = ProgramIdsHeldBy(first.pid());
  REQUIRE(!held.empty());
  const double attached = SumMetric(*first.Scrape(), "kpath_probe_attached");
  REQUIRE(attached > 0);

  first.Signal(SIGKILL);
  REQUIRE(first.WaitExit(5s) == 128 + SIGKILL);
  // Nothing is pinned or held elsewhere: the kernel frees every program once kpathd's
  // descriptors close with it (after an RCU grace period).
  std::set<int> left;
  for (int i = 0; i < 40; ++i) {
    left.clear();
    for (int id : ProgramIdsListedByBpftool()) {
      if (held.count(id)) left.insert(id);
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(50ms);
  }
  INFO(left.size() << " of kpathd's " << held.size() << " programs still loaded after kill -9");
  CHECK(left.empty());
  CommandResult pins = RunCommand("find /sys/fs/bpf -iname '*kpath*' 2>/dev/null");
  CHECK(pins.output.empty());

  KpathdProcess second({});
  REQUIRE(second.WaitUntilServing());
  CHECK(SumMetric(*second.Scrape(), "kpath_probe_attached") == attached);
  CHECK(!ProgramIdsHeldBy(second.pid()).empty());
  second.Signal(SIGTERM);
  CHECK(second.WaitExit(5s) == 0);
  // The first kpathd's mounts (the second found them there and leaves them): nested ones first.
  std::vector<std::string> left_mounted;
  for (const std::string& target : TraceMounts()) {
    if (std::find(mounts_before.begin(), mounts_before.end(), target) == mounts_before.end()) {
      left_mounted.push_back(target);
    }
  }
  std::sort(left_mounted.rbegin(), left_mounted.rend());
  for (const std::string& target : left_mounted) {
    INFO("unmounting " << target);
    CHECK(umount2(target.c_str(), MNT_DETACH) == 0);
  }
}
