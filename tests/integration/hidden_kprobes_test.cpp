// Seed 002 for real, on a kernel with kprobes (Debian's 6.1 under QEMU, tests/qemu/run.sh; the
// development kernel has CONFIG_KPROBES off and skips): a kprobe registered through tracefs
// kprobe_events (as a shell-script agent would) on vfs_read, and a BPF kprobe that a stand-in
// agent (agent/hook_agent --kprobe) attaches to security_file_permission, the hook that cost
// seed 002 30 % of its throughput. kpathd runs with its own percpu and madvise probes on kprobes
// too, under a name of its own, so that its kprobes are in kprobes/list and must not be counted.
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
#include <string>
#include <thread>
#include <vector>

#include "probes/kernel/kernel_features.h"
#include "support/expected_mechanisms.h"
#include "support/hook_agent.h"
#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

constexpr const char* kAgent = KPATH_HOOK_AGENT;
// kpathd's comm, with the test's pid (NamedKpathd): tells its hooks apart.
constexpr const char* kKpathdName = "kpathd-kp";
constexpr const char* kDebugfs = "/sys/kernel/debug";

// A filesystem mounted for the test when absent (debugfs, tracefs), unmounted afterwards.
class MountedFs {
 public:
  MountedFs(const std::string& probe, const std::string& target, const char* type)
      : target_(target) {
    if (std::filesystem::exists(probe)) return;
    mounted_ = mount("nodev", target.c_str(), type, 0, nullptr) == 0;
  }
  ~MountedFs() {
    if (mounted_) umount2(target_.c_str(), MNT_DETACH);
  }

 private:
  std::string target_;
  bool mounted_ = false;
};

std::string TracefsRoot() {
  for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    if (std::filesystem::exists(std::string(dir) + "/kprobe_events")) return dir;
  }
  return "";
}

// A tracefs kprobe event, enabled (armed) once defined; disabled and removed on destruction.
class KprobeEvent {
 public:
  KprobeEvent(std::string tracefs, std::string group, std::string event, const std::string& fn)
      : tracefs_(std::move(tracefs)), name_(group + "/" + event) {
    defined_ = WriteControlLine(tracefs_ + "/kprobe_events", "p:" + name_ + " " + fn, true);
  }
  ~KprobeEvent() { Remove(); }
  bool defined() const { return defined_; }
  bool Enable(bool on) {
    return WriteControlLine(tracefs_ + "/events/" + name_ + "/enable", on ? "1" : "0", false);
  }
  bool Remove() {
    if (!defined_) return true;
    Enable(false);
    if (WriteControlLine(tracefs_ + "/kprobe_events", "-:" + name_, true)) defined_ = false;
    return !defined_;
  }

 private:
  std::string tracefs_;
  std::string name_;
  bool defined_ = false;
};

// Lines of debugfs kprobes/list: every registered kprobe, whoever placed it.
std::vector<std::string> KprobesList() {
  std::ifstream in(std::string(kDebugfs) + "/kprobes/list");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// kpath_foreign_hook_info samples of kind kprobe, by target, as "owner hot value".
std::map<std::string, std::string> KprobeHooks(const std::string& exposition) {
  std::map<std::string, std::string> hooks;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("kpath_foreign_hook_info{", 0) != 0) continue;
    auto label = [&](const std::string& key) {
      size_t at = line.find(key + "=\"");
      if (at == std::string::npos) return std::string();
      at += key.size() + 2;
      return line.substr(at, line.find('"', at) - at);
    };
    if (label("kind") != "kprobe") continue;
    hooks[label("target")] =
        label("owner") + " " + label("hot") + " " + line.substr(line.rfind(' ') + 1);
  }
  return hooks;
}

}  // namespace

TEST_CASE(
    "seed 002: a tracefs kprobe and an agent's BPF kprobe on hot functions are hidden kprobes, "
    "hot, with the agent named; kpathd's own kprobes are not counted",
    "[hooks][kprobes]") {
  REQUIRE(IsRoot());
  if (!std::filesystem::exists("/sys/bus/event_source/devices/kprobe")) {
    REQUIRE_FALSE(MustAttach("percpu_alloc", "kprobe"));
    WARN(
        "skipped: this kernel has no kprobes (CONFIG_KPROBES off: no kprobe perf event source); "
        "tests/qemu/run.sh runs this on Debian's 6.1");
    return;
  }
  MountedFs debugfs(std::string(kDebugfs) + "/kprobes", kDebugfs, "debugfs");
  MountedFs tracefs("/sys/kernel/tracing/kprobe_events", "/sys/kernel/tracing", "tracefs");
  REQUIRE(std::filesystem::exists(std::string(kDebugfs) + "/kprobes/list"));
  const std::string tracing = TracefsRoot();
  REQUIRE_FALSE(tracing.empty());
  const size_t before_kpathd = KprobesList().size();

  NamedKpathd binary(kKpathdName);
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 250ms\n"
                                       "hooks:\n"
                                       "  refresh_interval: 1s\n"
                                       "probes:\n"
                                       "  percpu_alloc:\n"
                                       "    mechanisms: [kprobe]\n"
                                       "  madvise:\n"
                                       "    mechanisms: [kprobe]\n",
                        .binary = binary.path()});
  REQUIRE(kpathd.WaitUntilServing());
  INFO(kpathd.Output());
  std::string body = kpathd.Scrape().value_or("");
  REQUIRE(MetricValue(body, "kpath_probe_attached",
                      {{"probe", "percpu_alloc"}, {"mechanism", "kprobe"}}) == 1);
  REQUIRE(MetricValue(body, "kpath_probe_attached",
                      {{"probe", "madvise"}, {"mechanism", "kprobe"}}) == 1);
  // kpathd's own kprobes are registered like anyone's...
  const std::vector<std::string> with_kpathd = KprobesList();
  CHECK(with_kpathd.size() >= before_kpathd + 2);
  // ...and not counted: what kpathd sees hidden is what was there before it started.
  std::this_thread::sleep_for(1500ms);  // one refresh
  body = kpathd.Scrape().value_or("");
  const double hidden_before = MetricValue(body, "kpath_hidden_kprobes").value_or(-1);
  CHECK(hidden_before == static_cast<double>(before_kpathd));

  KprobeEvent event(tracing, "kpath_seed002", "vfs_read_" + std::to_string(getpid()), "vfs_read");
  REQUIRE(event.defined());
  REQUIRE(event.Enable(true));
  // Seed 002's hook; kernels built without LSMs (the 4.19 test kernel) inline it away, and the
  // agent then takes another function of the hot list.
  const std::string agent_target =
      kpath::LiveKernelFeatures(kpath::HostPaths(), /*may_mount=*/false)
              .KernelFunction("security_file_permission")
          ? "security_file_permission"
          : "vfs_write";
  const NamedBinary agent_binary(kAgent, "hook_agent");
  HookAgent agent(agent_binary.path(), {"--kprobe", agent_target});
  REQUIRE(agent.WaitReady(10s));

  std::map<std::string, std::string> hooks;
  for (auto deadline = std::chrono::steady_clock::now() + 6s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(100ms)) {
    body = kpathd.Scrape().value_or("");
    hooks = KprobeHooks(body);
    if (MetricValue(body, "kpath_hidden_kprobes") == hidden_before + 2 &&
        hooks.count(agent_target) && hooks.count("vfs_read")) {
      break;
    }
  }
  INFO(body);
  for (const std::string& line : KprobesList()) UNSCOPED_INFO("kprobes/list: " << line);
  CHECK(MetricValue(body, "kpath_hidden_kprobes") == hidden_before + 2);
  CHECK(MetricValue(body, "kpath_hidden_kprobes_disabled") == 0);
  CHECK(MetricValue(body, "kpath_kprobes_enabled") == 1);
  CHECK(
      MetricValue(body, "kpath_foreign_hooks", {{"kind", "kprobe"}, {"hot", "true"}}).value_or(0) >=
      2);
  // The agent's BPF kprobe names the agent; the tracefs event has no holder.
  CHECK(hooks[agent_target] == agent_binary.comm() + " true 1");
  CHECK(hooks["vfs_read"] == "unknown true 1");
  // Nothing of kpathd's: not its kprobe targets, not its name.
  CHECK(hooks.count("pcpu_alloc") == 0);
  CHECK(hooks.count("__x64_sys_madvise") == 0);
  CHECK(body.find("owner=\"" + binary.comm() + "\"") == std::string::npos);

  // Disarmed but registered, the tracefs kprobe is still hidden, and counted as disabled.
  REQUIRE(event.Enable(false));
  std::this_thread::sleep_for(1500ms);
  body = kpathd.Scrape().value_or("");
  CHECK(MetricValue(body, "kpath_hidden_kprobes") == hidden_before + 2);
  CHECK(MetricValue(body, "kpath_hidden_kprobes_disabled") == 1);

  // Gone once the agent exits and the event is removed.
  REQUIRE(agent.Stop() == 0);
  REQUIRE(event.Remove());
  bool gone = false;
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       !gone && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(100ms)) {
    body = kpathd.Scrape().value_or("");
    std::map<std::string, std::string> left = KprobeHooks(body);
    gone = MetricValue(body, "kpath_hidden_kprobes") == hidden_before &&
           left.count(agent_target) == 0 && left.count("vfs_read") == 0;
  }
  CHECK(gone);
  kpathd.Signal(SIGTERM);
  CHECK(kpathd.WaitExit(5s) == 0);
  CHECK(KprobesList().size() == before_kpathd);  // kpathd's kprobes went with it
}
