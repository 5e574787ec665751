// The foreign-hook inventory on the real kernel. A test-only stand-in agent (agent/hook_agent)
// attaches a classic tracepoint (sched:sched_switch, a hot target), a raw tracepoint
// (task_newtask) and a tp_btf program (sched_process_fork), and a uprobe program to a tracefs
// uprobe event this test defines. kpathd runs under a name of its own (a symlink), so that its
// comm tells its hooks from those of any other kpathd on the host. The set's fingerprint (issue
// 22) changes with the agent's hooks and is the one of the hooks listed beside it.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "probes/hooks/hook_set_fingerprint.h"
#include "support/expected_mechanisms.h"
#include "support/exposition.h"
#include "support/hook_agent.h"
#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

constexpr const char* kAgent = KPATH_HOOK_AGENT;
// kpathd's comm, with the test's pid (NamedKpathd): tells its hooks apart.
constexpr const char* kKpathdName = "kpathd-hook";

// tracefs, mounted for the test when the host has it unmounted, unmounted again afterwards.
class Tracefs {
 public:
  Tracefs() {
    for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
      if (std::filesystem::exists(std::string(dir) + "/uprobe_events")) {
        path_ = dir;
        return;
      }
    }
    if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0) {
      path_ = "/sys/kernel/tracing";
      mounted_ = true;
    }
  }
  ~Tracefs() {
    if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

// A tracefs uprobe event, removed on destruction if the test did not remove it.
class UprobeEvent {
 public:
  UprobeEvent(std::string tracefs, std::string name, const std::string& target)
      : file_(tracefs + "/uprobe_events"), name_(std::move(name)) {
    defined_ = WriteControlLine(file_, "p:" + name_ + " " + target, /*append=*/true);
  }
  ~UprobeEvent() { Remove(); }
  bool defined() const { return defined_; }
  bool Remove() {
    if (defined_ && WriteControlLine(file_, "-:" + name_, /*append=*/true)) defined_ = false;
    return !defined_;
  }

 private:
  std::string file_;
  std::string name_;
  bool defined_ = false;
};

std::vector<Sample> HooksOwnedBy(const std::string& exposition, const std::string& owner) {
  std::vector<Sample> hooks;
  for (Sample& s : Samples(exposition, "kpath_foreign_hook_info")) {
    if (s.labels["owner"] == owner) hooks.push_back(std::move(s));
  }
  return hooks;
}

// kpath_foreign_hook_set_info of one scrape, and the fingerprint of the kpath_foreign_hook_info
// series beside it (the same inventory: equal while none is omitted or shortened).
struct ExportedSet {
  size_t series = 0;
  std::string fingerprint;
  std::string from_info;
  bool comparable = false;
};

ExportedSet SetOf(const std::string& exposition) {
  ExportedSet set;
  std::vector<Sample> sets = Samples(exposition, "kpath_foreign_hook_set_info");
  set.series = sets.size();
  if (!sets.empty()) set.fingerprint = sets.front().labels["fingerprint"];
  std::vector<kpath::ForeignHook> hooks;
  set.comparable = MetricValue(exposition, "kpath_foreign_hook_info_omitted") == 0;
  for (Sample& s : Samples(exposition, "kpath_foreign_hook_info")) {
    if (s.labels["target"].starts_with("...")) set.comparable = false;
    hooks.push_back(
        {.kind = s.labels["kind"], .target = s.labels["target"], .owner = s.labels["owner"]});
  }
  set.from_info = kpath::FingerprintHookSet(hooks).Hex();
  return set;
}

// One series, whose fingerprint is that of the hooks listed beside it where all are listed.
void CheckOneSetOfTheListedHooks(const ExportedSet& set) {
  CHECK(set.series == 1);
  if (set.comparable) {
    CHECK(set.fingerprint == set.from_info);
  } else {
    WARN(
        "more hooks than hooks.max_info_series, or a shortened target: the fingerprint was not "
        "recomputed from kpath_foreign_hook_info");
  }
}

std::string DebugfsMounts() {
  std::ifstream mounts("/proc/self/mounts");
  std::string lines;
  for (std::string line; std::getline(mounts, line);) {
    if (line.find(" debugfs ") != std::string::npos ||
        line.find(" tracefs ") != std::string::npos) {
      lines += line + "\n";
    }
  }
  return lines;
}

}  // namespace

TEST_CASE(
    "a stand-in agent's tracepoint, raw tracepoint, tp_btf and uprobe hooks are listed with "
    "kind, target and owner, its CPU time is charged, kpathd's own hooks are not listed, "
    "and all of it is gone within one refresh of the agent's exit",
    "[hooks][integration]") {
  REQUIRE(IsRoot());
  if (!HostHasVmlinuxBtf()) {
    WARN("skipped: the stand-in agent's tp_btf hook needs the kernel's BTF");
    return;
  }
  const std::string mounts_before = DebugfsMounts();
  {
    Tracefs tracefs;
    REQUIRE_FALSE(tracefs.path().empty());  // CONFIG_UPROBE_EVENTS: every kernel kpathd serves
    CommandResult print = RunCommand(std::string(kAgent) + " --print-uprobe-target");
    REQUIRE(print.status == 0);
    std::string target = print.output.substr(0, print.output.find('\n'));
    const std::string event = "kpath_hook_test/agent_" + std::to_string(getpid());
    UprobeEvent uprobe(tracefs.path(), event, target);
    REQUIRE(uprobe.defined());

    NamedKpathd binary(kKpathdName);
    const NamedBinary agent_binary(kAgent, "hook_agent");
    const std::string& owner = agent_binary.comm();
    KpathdProcess kpathd({.config_yaml = "sampling_interval: 250ms\n"
                                         "hooks:\n"
                                         "  refresh_interval: 1s\n"
                                         "  bpf_stats: always\n",
                          .binary = binary.path()});
    REQUIRE(kpathd.WaitUntilServing());
    const ExportedSet before = SetOf(kpathd.Scrape().value_or(""));
    CHECK(before.series == 1);
    HookAgent agent(agent_binary.path(), {"--uprobe-event", event});
    REQUIRE(agent.WaitReady(60s));

    // All four at the next refreshes (1 s apart; the deadline is for a busy host).
    std::string body;
    std::vector<Sample> hooks;
    for (auto deadline = std::chrono::steady_clock::now() + 60s;
         std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(100ms)) {
      body = kpathd.Scrape().value_or("");
      hooks = HooksOwnedBy(body, owner);
      // Every hook listed, and each program checked below has run (the agent's uprobe target
      // runs when the agent's loop gets the CPU: later than its tracepoints on a busy host).
      auto ran = [&](const char* program) {
        return Sum(body, "kpath_foreign_bpf_runs_total", {{"owner", owner}, {"program", program}}) >
               0;
      };
      if (hooks.size() >= 4 && ran("agent_tp_switch") && ran("agent_uprobe") &&
          Sum(body, "kpath_foreign_bpf_run_seconds_total",
              {{"owner", owner}, {"program", "agent_tp_switch"}, {"sampled", "false"}}) > 0) {
        break;
      }
    }
    INFO(body);
    INFO(kpathd.Output());
    auto find = [&](const std::string& kind, const std::string& hook_target) -> const Sample* {
      for (const Sample& s : hooks) {
        if (s.labels.at("kind") == kind && s.labels.at("target") == hook_target) return &s;
      }
      return nullptr;
    };
    const Sample* tracepoint = find("tracepoint", "sched:sched_switch");
    REQUIRE(tracepoint != nullptr);
    CHECK(tracepoint->labels.at("hot") == "true");
    CHECK(tracepoint->value == 1);
    CHECK(find("raw_tracepoint", "task:task_newtask") != nullptr);
    const Sample* tp_btf = find("raw_tracepoint", "sched:sched_process_fork");
    REQUIRE(tp_btf != nullptr);
    CHECK(tp_btf->labels.at("hot") == "false");
    const Sample* probe = find("uprobe", target);
    REQUIRE(probe != nullptr);
    CHECK(probe->value == 1);  // the tracefs event and the agent's program on it: one hook
    CHECK(hooks.size() == 4);
    // The set with the agent's hooks is another set, and the one of the hooks listed.
    const ExportedSet with_agent = SetOf(body);
    CHECK(with_agent.fingerprint != before.fingerprint);
    CheckOneSetOfTheListedHooks(with_agent);

    // Its CPU time, from the kernel's statistics held on by kpathd (exact: sampled="false").
    CHECK(Sum(body, "kpath_foreign_bpf_run_seconds_total",
              {{"owner", owner}, {"program", "agent_tp_switch"}, {"sampled", "false"}}) > 0);
    CHECK(Sum(body, "kpath_foreign_bpf_runs_total",
              {{"owner", owner}, {"program", "agent_tp_switch"}}) > 0);
    CHECK(Sum(body, "kpath_foreign_bpf_runs_total",
              {{"owner", owner}, {"program", "agent_uprobe"}}) > 0);
    CHECK(MetricValue(body, "kpath_foreign_bpf_stats_coverage_ratio") == 1);
    CHECK(MetricValue(body, "kpath_bpf_stats_enabled") == 1);  // kpathd's own cost is exported

    // Nothing of kpathd's own, although its probes are attached.
    CHECK(MetricValue(body, "kpath_probe_attached", {{"probe", "percpu_alloc"}}) == 1);
    CHECK(HooksOwnedBy(body, binary.comm()).empty());
    CHECK(Sum(body, "kpath_foreign_bpf_runs_total", {{"owner", binary.comm()}}) == 0);
    CHECK(MetricValue(body, "kpath_foreign_hook_source_available", {{"source", "bpf"}}) == 1);
    if (!std::filesystem::exists("/sys/kernel/debug/kprobes") &&
        !std::filesystem::exists("/sys/bus/event_source/devices/kprobe")) {
      WARN("this kernel has no kprobes (CONFIG_KPROBES off): kpath_hidden_kprobes must be 0");
      CHECK(MetricValue(body, "kpath_hidden_kprobes") == 0);
      CHECK(kpathd.Output().find("kpath_hidden_kprobes is 0") != std::string::npos);
    }

    // The agent exits and the event is removed: gone at the next refresh.
    REQUIRE(agent.Stop() == 0);
    REQUIRE(uprobe.Remove());
    auto removed = std::chrono::steady_clock::now();
    bool gone = false;
    while (std::chrono::steady_clock::now() - removed < 60s) {
      body = kpathd.Scrape().value_or("");
      gone = !body.empty() && HooksOwnedBy(body, owner).empty() &&
             body.find(target) == std::string::npos;
      if (gone) break;
      std::this_thread::sleep_for(50ms);
    }
    auto took = std::chrono::steady_clock::now() - removed;
    CHECK(gone);
    const ExportedSet after = SetOf(body);
    CHECK(after.fingerprint != with_agent.fingerprint);
    CheckOneSetOfTheListedHooks(after);
    // One refresh (1 s), plus the sampling tick it lands on (250 ms) and scrape slack, on an
    // idle host; a busy one runs kpathd's sampling thread late, which is not what is tested.
    if (took >= 1600ms) {
      WARN("gone after " << std::chrono::duration<double>(took).count()
                         << " s: more than one refresh (a busy host?)");
    }

    kpathd.Signal(SIGTERM);
    CHECK(kpathd.WaitExit(5s) == 0);
  }
  // No uprobe event, debugfs or tracefs mount left behind.
  std::ifstream events("/sys/kernel/tracing/uprobe_events");
  std::string remaining((std::istreambuf_iterator<char>(events)), std::istreambuf_iterator<char>());
  CHECK(remaining.find("kpath_hook_test/") == std::string::npos);
  CHECK(DebugfsMounts() == mounts_before);
}

TEST_CASE("sampled BPF statistics charge a foreign program's CPU time, labelled sampled",
          "[hooks][integration]") {
  REQUIRE(IsRoot());
  if (!HostHasVmlinuxBtf()) {
    WARN("skipped: the stand-in agent's tp_btf hook needs the kernel's BTF");
    return;
  }
  std::ifstream sysctl("/proc/sys/kernel/bpf_stats_enabled");
  int stats_on = 0;
  sysctl >> stats_on;
  NamedKpathd binary(kKpathdName);
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 250ms\n"
                                       "hooks:\n"
                                       "  refresh_interval: 1s\n"
                                       "  bpf_stats: sampled\n"
                                       "  bpf_stats_slice: 300ms\n",
                        .binary = binary.path()});
  REQUIRE(kpathd.WaitUntilServing());
  const NamedBinary agent_binary(kAgent, "hook_agent");
  const std::string& owner = agent_binary.comm();
  HookAgent agent(agent_binary.path(), {});
  REQUIRE(agent.WaitReady(60s));
  // With the sysctl on, the kernel keeps exact figures and kpathd reports those instead.
  const std::string sampled = stats_on ? "false" : "true";
  if (stats_on) WARN("kernel.bpf_stats_enabled is 1 on this host: exact figures, not sampled");
  std::string body;
  double seconds = 0;
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       std::chrono::steady_clock::now() < deadline && seconds <= 0;
       std::this_thread::sleep_for(100ms)) {
    body = kpathd.Scrape().value_or("");
    seconds = Sum(body, "kpath_foreign_bpf_run_seconds_total",
                  {{"owner", owner}, {"program", "agent_tp_switch"}, {"sampled", sampled}});
  }
  INFO(body);
  INFO(kpathd.Output());
  CHECK(seconds > 0);
  CHECK(Sum(body, "kpath_foreign_bpf_runs_total",
            {{"owner", owner}, {"program", "agent_tp_switch"}, {"sampled", sampled}}) > 0);
  CHECK(MetricValue(body, "kpath_foreign_bpf_stats_coverage_ratio") ==
        Approx(stats_on ? 1.0 : 0.3));
  // A partial hold leaves kpathd's own statistics off (they would undercount).
  if (!stats_on) CHECK(MetricValue(body, "kpath_bpf_stats_enabled") == 0);
  CHECK(agent.Stop() == 0);
  kpathd.Signal(SIGTERM);
  CHECK(kpathd.WaitExit(5s) == 0);
}

// Operator review D8: under the default hooks.bpf_stats (sampled) kpathd's own programs were
// never priced, so KpathdBpfOverheadHigh could not fire. The sampler's slices price them now.
TEST_CASE("kpathd's own BPF programs are priced under the default sampled statistics",
          "[hooks][integration]") {
  REQUIRE(IsRoot());
  std::ifstream sysctl("/proc/sys/kernel/bpf_stats_enabled");
  int stats_on = 0;
  sysctl >> stats_on;
  if (stats_on) WARN("kernel.bpf_stats_enabled is 1 on this host: exact figures, not sampled");
  // hooks.bpf_stats left at its default; a short period so that slices come every second.
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 250ms\n"
                                       "hooks:\n"
                                       "  refresh_interval: 1s\n"
                                       "  bpf_stats_slice: 300ms\n"});
  REQUIRE(kpathd.WaitUntilServing());
  std::string body;
  double seconds = 0, runs = 0;
  // kpathd's irqoff timer ticks (and the cgroup, percpu and madvise programs) run all the time.
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       std::chrono::steady_clock::now() < deadline && (seconds <= 0 || runs <= 0);
       std::this_thread::sleep_for(200ms)) {
    body = kpathd.Scrape().value_or("");
    seconds = Sum(body, "kpath_bpf_program_run_seconds_total", {});
    runs = Sum(body, "kpath_bpf_program_runs_total", {});
  }
  INFO(body);
  INFO(kpathd.Output());
  CHECK(seconds > 0);
  CHECK(runs > 0);
  if (!stats_on) CHECK(MetricValue(body, "kpath_bpf_stats_enabled") == 0);
  // A counter: it only grows from scrape to scrape.
  std::this_thread::sleep_for(1500ms);
  std::string later = kpathd.Scrape().value_or("");
  CHECK(Sum(later, "kpath_bpf_program_run_seconds_total", {}) >= seconds);
  kpathd.Signal(SIGTERM);
  CHECK(kpathd.WaitExit(5s) == 0);
}

TEST_CASE(
    "another kpathd process of the same executable (diagnose beside the service) is not a "
    "foreign hook owner, while a different kpathd executable is",
    "[hooks][integration]") {
  REQUIRE(IsRoot());
  // Two processes of one executable under one name, and a copy of the binary (another file).
  constexpr const char* kTwinName = "kpathd-twin";
  constexpr const char* kOtherName = "kpathd-other";
  NamedKpathd twin(kTwinName);
  std::filesystem::path copy_dir =
      std::filesystem::temp_directory_path() / ("kpath-hooks-copy-" + std::to_string(getpid()));
  std::filesystem::create_directories(copy_dir);
  std::filesystem::path copy = copy_dir / kOtherName;
  std::filesystem::copy_file(KpathdBinary(), copy,
                             std::filesystem::copy_options::overwrite_existing);
  const std::string config = "sampling_interval: 250ms\nhooks:\n  refresh_interval: 1s\n";
  {
    KpathdProcess first({.config_yaml = config, .binary = twin.path()});
    KpathdProcess second({.config_yaml = config, .binary = twin.path()});
    KpathdProcess other({.config_yaml = config, .binary = copy.string()});
    REQUIRE(first.WaitUntilServing());
    REQUIRE(second.WaitUntilServing());
    REQUIRE(other.WaitUntilServing());
    // The copy's BPF hooks appear in the first's inventory (it would see a twin's just as well).
    std::string body;
    for (auto deadline = std::chrono::steady_clock::now() + 60s;
         std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(100ms)) {
      body = first.Scrape().value_or("");
      if (!HooksOwnedBy(body, kOtherName).empty()) break;
    }
    INFO(body);
    REQUIRE_FALSE(HooksOwnedBy(body, kOtherName).empty());
    // One more refresh for both twins, then neither lists the other's hooks.
    std::this_thread::sleep_for(1500ms);
    for (KpathdProcess* kpathd : {&first, &second}) {
      std::string scraped = kpathd->Scrape().value_or("");
      INFO(scraped);
      CHECK_FALSE(scraped.empty());
      CHECK(HooksOwnedBy(scraped, kTwinName).empty());
      CHECK(Sum(scraped, "kpath_foreign_bpf_runs_total", {{"owner", kTwinName}}) == 0);
    }
    for (KpathdProcess* kpathd : {&first, &second, &other}) {
      kpathd->Signal(SIGTERM);
      CHECK(kpathd->WaitExit(5s) == 0);
    }
  }
  std::filesystem::remove_all(copy_dir);
}
