// Events on the real kernel (issue 22, docs/events.md): the BPF IRQ-off fixture's regions and a
// stand-in agent's hooks, as the real kpathd serves them at /events over real HTTP, writes them
// to the journal (journald's socket, when the host runs journald) or to stderr as JSON lines,
// and as `kpathd events` prints them.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "daemon/events/event_json.h"
#include "daemon/events/event_log.h"
#include "irqoff_fixture.h"
#include "probes/irqoff/irqoff_events.h"
#include "support/expected_mechanisms.h"
#include "support/hook_agent.h"
#include "support/kpathd_process.h"
#include "support/temp_dir.h"

using namespace std::chrono_literals;
using namespace kpath::testing;
using kpath::JsonField;

namespace {

constexpr const char* kFixtureThread = "kpath-events-fx";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The event lines of GET /events?format=lines&<query> (the header line dropped).
std::vector<std::string> EventLines(KpathdProcess& kpathd, const std::string& query) {
  std::optional<HttpResponse> reply = HttpGet(kpathd.port(), "/events?format=lines&" + query);
  REQUIRE(reply);
  INFO(reply->body);
  REQUIRE(reply->status == 200);
  std::vector<std::string> lines = Lines(reply->body);
  REQUIRE_FALSE(lines.empty());
  lines.erase(lines.begin());
  return lines;
}

// The event lines among `lines` whose `key` is `value`.
std::vector<std::string> With(const std::vector<std::string>& lines, const std::string& key,
                              const std::string& value) {
  std::vector<std::string> out;
  for (const std::string& line : lines) {
    if (JsonField(line, key) == value) out.push_back(line);
  }
  return out;
}

bool JournaldHere() {
  struct stat st {};
  return stat("/run/systemd/journal/socket", &st) == 0 && S_ISSOCK(st.st_mode) &&
         RunCommand("journalctl --version").status == 0;
}

int LastCpu() {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n - 1 : 0;
}

}  // namespace

TEST_CASE(
    "real IRQ-off regions are events with their CPU, pid and stack: at /events, in the "
    "journal or as JSON lines, and in kpathd events",
    "[events][irqoff]") {
  REQUIRE(IsRoot());
  std::string why;
  std::unique_ptr<IrqOffFixture> fixture = IrqOffFixture::Load(&why);
  if (!fixture) {
    WARN("skipped: " << why);
    return;
  }
  const bool journald = JournaldHere();
  // As under systemd: stderr is "the journal stream" (JOURNAL_STREAM names it), so events go to
  // journald's socket where there is one, and to the log, a JSON object a line, where there is
  // none.
  KpathdProcess kpathd({.args = {"--log-level", "debug"},
                        .config_yaml = "sampling_interval: 300ms\n",
                        .journal_stream = true});
  REQUIRE(kpathd.WaitUntilServing());
  const int cpu = LastCpu();
  constexpr int kRegions = 3;
  std::vector<std::chrono::nanoseconds> held =
      fixture->HoldIrqsOff(cpu, 30ms, kRegions, 150ms, kFixtureThread);
  REQUIRE(held.size() == kRegions);
  const pid_t tid = fixture->last_thread();

  std::vector<std::string> regions;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(200ms)) {
    regions = With(EventLines(kpathd, "kind=irqoff_region"), "comm", kFixtureThread);
    if (regions.size() >= kRegions) break;
  }
  const std::string output = kpathd.Output();
  INFO(output);
  // One event per region; the software timer may miss the thread at a region's very edge (see
  // irqoff_test.cpp): allow one such miss.
  CHECK(regions.size() >= kRegions - 1);
  CHECK(regions.size() <= kRegions);
  REQUIRE_FALSE(regions.empty());
  for (const std::string& line : regions) {
    INFO(line);
    CHECK(JsonField(line, "cpu") == std::to_string(cpu));
    CHECK(JsonField(line, "pid") == std::to_string(tid));
    const double seconds = std::stod(JsonField(line, "seconds").value_or("0"));
    CHECK(seconds >= 0.75 * 0.030);
    CHECK(seconds <= 1.25 * 0.030 + 0.010);
    // The stack symbolised (kernel function names, not bare addresses), unless the late
    // interrupt landed in user code: no kernel frames then (as on hypervisors that deliver a
    // pending timer only at the next exit to user mode).
    if (JsonField(line, "landed") == "user") {
      CHECK(line.find("\"stack\":[]") != std::string::npos);
    } else {
      const size_t stack = line.find("\"stack\":[\"");
      REQUIRE(stack != std::string::npos);
      CHECK(line.substr(stack + 10, 2) != "0x");
    }
    // The region the detector logged, the same stack included.
    const std::string message = JsonField(line, "message").value_or("");
    REQUIRE(message.starts_with("IRQs off "));
    CHECK(output.find("irqoff: region " + message.substr(9)) != std::string::npos);
    // Its time: within the last minute.
    const std::string time = JsonField(line, "time").value_or("");
    absl::Time t;
    std::string error;
    REQUIRE(absl::ParseTime(absl::RFC3339_full, time, &t, &error));
    CHECK(absl::Now() - t < absl::Minutes(1));
  }
  // The same events in the journal, or as JSON lines on stderr.
  if (journald) {
    CommandResult journal =
        RunCommand("journalctl -o export --since=-5min KPATH_EVENT=irqoff_region _PID=" +
                   std::to_string(kpathd.pid()));
    INFO(journal.output);
    CHECK(journal.output.find("KPATH_COMM=" + std::string(kFixtureThread)) != std::string::npos);
    CHECK(journal.output.find("KPATH_CPU=" + std::to_string(cpu)) != std::string::npos);
    CHECK(journal.output.find("KPATH_PID=" + std::to_string(tid)) != std::string::npos);
  } else {
    WARN("no journald on this host: the events went to the log, a JSON object a line");
    CHECK(output.find("events also to the log") != std::string::npos);
    std::vector<std::string> logged;
    for (const std::string& line : Lines(output)) {
      // Formatted as every log line under systemd: the priority first.
      if (line.starts_with("<6>info: event: {\"seq\":")) logged.push_back(line);
    }
    std::vector<std::string> fixture_lines = With(logged, "comm", kFixtureThread);
    CHECK(fixture_lines.size() == regions.size());
    for (const std::string& line : fixture_lines) {
      CHECK(JsonField(line, "cpu") == std::to_string(cpu));
      CHECK(JsonField(line, "pid") == std::to_string(tid));
    }
  }

  // kpathd events prints them, one line each, time, kind and message.
  const std::string url = "http://127.0.0.1:" + std::to_string(kpathd.port());
  CommandResult text = RunCommand(KpathdBinary() + " events --url " + url + " --since 5m");
  INFO(text.output);
  CHECK(text.status == 0);
  // Each region's line: its time, kind and message (CPU, process, pid, culprit and stack).
  for (const std::string& line : regions) {
    const std::string printed = JsonField(line, "time").value_or("?") + " irqoff_region " +
                                JsonField(line, "message").value_or("?") + "\n";
    CHECK(text.output.find(printed) != std::string::npos);
    CHECK(printed.find("on CPU " + std::to_string(cpu) + " in " + kFixtureThread + " (pid " +
                       std::to_string(tid) + ")") != std::string::npos);
  }
  // --json: the lines /events holds, one object a line.
  CommandResult json =
      RunCommand(KpathdBinary() + " events --json --kind irqoff_region --url " + url);
  CHECK(json.status == 0);
  CHECK(With(Lines(json.output), "comm", kFixtureThread).size() == regions.size());
  // Bad input is refused with a reason, and an unreachable kpathd is an error.
  CommandResult bad = RunCommand(KpathdBinary() + " events --since yesterday --url " + url);
  CHECK(bad.status == 1);
  CHECK(bad.output.find("since \"yesterday\"") != std::string::npos);
  std::optional<HttpResponse> bad_query = HttpGet(kpathd.port(), "/events?since=yesterday");
  REQUIRE(bad_query);
  CHECK(bad_query->status == 400);
  CommandResult nobody =
      RunCommand(KpathdBinary() + " events --url http://127.0.0.1:" + std::to_string(FreePort()));
  CHECK(nobody.status == 1);
  CHECK(nobody.output.find("cannot connect") != std::string::npos);
}

TEST_CASE("a stand-in agent's hooks appear as events, and leave as events when it exits",
          "[events][hooks]") {
  REQUIRE(IsRoot());
  if (!HostHasVmlinuxBtf()) {
    WARN("skipped: the stand-in agent's tp_btf hook needs the kernel's BTF");
    return;
  }
  NamedKpathd binary("kpathd-evtest");
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 250ms\n"
                                       "hooks:\n"
                                       "  refresh_interval: 1s\n",
                        .binary = binary.path()});
  REQUIRE(kpathd.WaitUntilServing());
  // Follow from the start, as an operator would.
  const std::string url = "http://127.0.0.1:" + std::to_string(kpathd.port());
  HookAgent agent(KPATH_HOOK_AGENT, {});
  REQUIRE(agent.WaitReady(60s));

  auto agent_events = [&](const std::string& kind) {
    return With(EventLines(kpathd, "kind=" + kind), "owner", "hook_agent");
  };
  std::vector<std::string> appeared;
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < deadline && appeared.size() < 3;
       std::this_thread::sleep_for(200ms)) {
    appeared = agent_events("hook_appeared");
  }
  INFO(kpathd.Output());
  // Its tracepoint, raw tracepoint and tp_btf hooks (as hooks_inventory_test.cpp lists them),
  // appearing after kpathd's first inventory.
  CHECK(With(appeared, "target", "sched:sched_switch").size() == 1);
  CHECK(With(appeared, "target", "task:task_newtask").size() == 1);
  CHECK(With(appeared, "target", "sched:sched_process_fork").size() == 1);
  for (const std::string& line : appeared) CHECK(JsonField(line, "at_start") == "0");
  CHECK(agent_events("hook_left").empty());

  REQUIRE(agent.Stop() == 0);
  std::vector<std::string> left;
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < deadline && left.size() < appeared.size();
       std::this_thread::sleep_for(200ms)) {
    left = agent_events("hook_left");
  }
  CHECK(left.size() == appeared.size());
  CHECK(With(left, "target", "sched:sched_switch").size() == 1);
  // kpathd events prints both, in order.
  CommandResult text = RunCommand(KpathdBinary() + " events --url " + url);
  INFO(text.output);
  const size_t in = text.output.find(
      "hook_appeared foreign tracepoint on sched:sched_switch "
      "(owner hook_agent");
  const size_t out = text.output.find(
      "hook_left foreign tracepoint on sched:sched_switch "
      "(owner hook_agent");
  CHECK(in != std::string::npos);
  CHECK(out != std::string::npos);
  CHECK(in < out);
}

// The journal form of a region's stack (docs/events.md): one field, KPATH_STACK, a frame a line,
// in the native protocol's length-prefixed form. The development host runs no journald, and in
// the systemd stage the regions' late interrupts may all land in user code (no kernel stack), so
// here a real systemd-journald runs alone in a mount namespace of its own (tmpfs on
// /run/systemd/journal and /run/log/journal), kpathd's EventLog sends it a region with a
// four-frame stack, and journalctl -o json reads it back.
TEST_CASE("a region's multi-line stack reaches a real journald as one KPATH_STACK field",
          "[events][journal]") {
  REQUIRE(IsRoot());
  const char* journald = "/lib/systemd/systemd-journald";
  if (access(journald, X_OK) != 0) {
    WARN("not checked: no " << journald << " (Debian's systemd package)");
    return;
  }
  TempDir dir;
  const std::string out = dir / "journal.json";
  const std::vector<std::string> frames = {"native_queued_spin_lock_slowpath+0x6a",
                                           "_raw_spin_lock_irqsave+0x3e", "get_slabinfo+0x2f",
                                           "s_show+0x21"};
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Exit 0 when journalctl shows the entry; 10 and up name the step that failed.
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr)) {
      _exit(10);
    }
    for (const char* d : {"/run/systemd/journal", "/run/log/journal"}) {
      std::error_code ec;
      std::filesystem::create_directories(d, ec);
      if (mount("tmpfs", d, "tmpfs", 0, "mode=0755") != 0) _exit(11);
    }
    const pid_t jd = fork();
    if (jd == 0) {
      const int null = open("/dev/null", O_RDWR);
      dup2(null, 1);
      dup2(null, 2);
      execl(journald, journald, nullptr);
      _exit(127);
    }
    struct stat st {};
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {
      up = stat(kpath::kJournalSocket.data(), &st) == 0 && S_ISSOCK(st.st_mode);
      if (!up) usleep(50000);
    }
    int rc = 12;
    if (up) {
      kpath::IrqOffRegion r;
      r.seconds = 0.0301;
      r.cpu = 3;
      r.pid = 4242;
      r.comm = "kpath-jd-stack";
      r.culprit = "get_slabinfo";
      r.frames = frames;
      kpath::EventLog log(kpath::EventLogOptions{.output = kpath::EventOutput::kJournal});
      log.Emit(kpath::RegionEvent(r, absl::Now()));
      rc = 13;
      const std::string read =
          "journalctl -D /run/log/journal -o json --no-pager "
          "KPATH_EVENT=irqoff_region KPATH_COMM=kpath-jd-stack >" +
          out + " 2>&1";
      for (int i = 0; i < 100 && rc != 0; ++i) {
        if (std::system(read.c_str()) == 0 && std::filesystem::file_size(out) > 0) rc = 0;
        if (rc != 0) usleep(100000);
      }
    }
    kill(jd, SIGTERM);
    waitpid(jd, nullptr, 0);
    _exit(rc);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  INFO(line);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::string stack;
  for (const std::string& f : frames) stack += (stack.empty() ? "" : "\n") + f;
  CHECK(JsonField(line, "KPATH_STACK") == stack);
  CHECK(JsonField(line, "KPATH_CPU") == "3");
  CHECK(JsonField(line, "KPATH_PID") == "4242");
  CHECK(JsonField(line, "KPATH_CULPRIT") == "get_slabinfo");
  CHECK(JsonField(line, "KPATH_SEQ") == "1");
  CHECK(JsonField(line, "SYSLOG_IDENTIFIER") == "kpathd");
  CHECK(JsonField(line, "PRIORITY") == "5");
  CHECK(JsonField(line, "MESSAGE")
            .value_or("")
            .starts_with("IRQs off 30.1 ms on CPU 3 in "
                         "kpath-jd-stack (pid 4242)"));
  std::cout << "[events] a real journald's entry: KPATH_STACK "
            << JsonField(line, "KPATH_STACK").value_or("?").size() << " bytes, "
            << std::count(stack.begin(), stack.end(), '\n') + 1 << " frames a line each\n";
}
