// The foreign-hook inventory built from what real kernels showed: a stand-in agent's and a
// kpathd's BPF objects captured on 6.18 (with bpftool's view of them), seed 002's kprobes on a
// 4.19 kernel, and inline cases for de-duplication across sources; the fingerprint of the hook
// set (issue 22) over those inventories.
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "probes/hooks/bpf_stats_sampler.h"
#include "probes/hooks/foreign_hook_inventory.h"
#include "probes/hooks/hook_inventory.h"
#include "probes/hooks/hook_set_fingerprint.h"

using namespace kpath;
using namespace std::chrono_literals;

namespace {

const std::string kCapture = std::string(KPATH_FIXTURES) + "/bpf-holders-linux-6.18.44-x86_64";
constexpr pid_t kAgentPid = 31951;
constexpr pid_t kKpathdPid = 31960;

std::string Fixture(const std::string& relative) {
  absl::StatusOr<std::string> text = ReadFileToString(std::string(KPATH_FIXTURES) + "/" + relative);
  INFO(relative);
  REQUIRE(text.ok());
  return *text;
}

uint32_t ProgType(const std::string& name) {
  for (uint32_t t = 0; t < 64; ++t) {
    const char* s = libbpf_bpf_prog_type_str(static_cast<enum bpf_prog_type>(t));
    if (s && name == s) return t;
  }
  FAIL("unknown program type " << name);
  return 0;
}

uint32_t LinkType(const std::string& name) {
  for (uint32_t t = 0; t < 64; ++t) {
    const char* s = libbpf_bpf_link_type_str(static_cast<enum bpf_link_type>(t));
    if (s && name == s) return t;
  }
  FAIL("unknown link type " << name);
  return 0;
}

// BPF_TASK_FD_QUERY answers as bpftool recorded them (bpftool -j perf show).
TaskFdQueryFn RecordedQueries() {
  auto answers = std::make_shared<std::map<std::pair<pid_t, int>, TaskFdQuery>>();
  YAML::Node perf = YAML::LoadFile(kCapture + "/bpftool-perf-show.json");
  for (const YAML::Node& entry : perf) {
    TaskFdQuery q;
    q.prog_id = entry["prog_id"].as<uint32_t>();
    std::string type = entry["fd_type"].as<std::string>();
    if (type == "tracepoint" || type == "raw_tracepoint") {
      q.fd_type = type == "tracepoint" ? BPF_FD_TYPE_TRACEPOINT : BPF_FD_TYPE_RAW_TRACEPOINT;
      q.name = entry["tracepoint"].as<std::string>();
    } else if (type == "uprobe") {
      q.fd_type = BPF_FD_TYPE_UPROBE;
      q.name = entry["filename"].as<std::string>();
      q.probe_offset = entry["offset"].as<uint64_t>();
    }
    (*answers)[{entry["pid"].as<pid_t>(), entry["fd"].as<int>()}] = q;
  }
  return [answers](pid_t pid, int fd) -> std::optional<TaskFdQuery> {
    auto it = answers->find({pid, fd});
    if (it == answers->end()) return std::nullopt;
    return it->second;
  };
}

BpfSources CapturedBpf() {
  BpfSources bpf;
  for (const YAML::Node& p : YAML::LoadFile(kCapture + "/bpftool-prog-show.json")) {
    BpfProgramInfo program;
    program.id = p["id"].as<uint32_t>();
    program.type = ProgType(p["type"].as<std::string>());
    program.name = p["name"] ? p["name"].as<std::string>() : "";
    program.run_time_ns = 1000 * program.id;  // not captured (statistics were off)
    program.run_count = program.id;
    bpf.programs.push_back(program);
  }
  for (const YAML::Node& l : YAML::LoadFile(kCapture + "/bpftool-link-show.json")) {
    BpfLinkInfo link;
    link.id = l["id"].as<uint32_t>();
    link.type = LinkType(l["type"].as<std::string>());
    link.prog_id = l["prog_id"].as<uint32_t>();
    if (l["tp_name"]) link.tp_name = l["tp_name"].as<std::string>();
    bpf.links.push_back(link);
  }
  HostPaths paths(kCapture + "/proc", kCapture + "/sys");
  BpfHolderScan own;
  own.only = "self";
  own.self_pid = kKpathdPid;
  bpf.own = ScanBpfHolders(paths, own, RecordedQueries());
  BpfHolderScan others;
  others.skip_pid = kKpathdPid;
  bpf.foreign = ScanBpfHolders(paths, others, RecordedQueries());
  return bpf;
}

std::string Qualify(std::string_view event) {
  static const std::map<std::string, std::string, std::less<>> kCategories = {
      {"sched_switch", "sched:sched_switch"},
      {"task_newtask", "task:task_newtask"},
      {"sched_process_fork", "sched:sched_process_fork"},
      {"percpu_alloc_percpu", "percpu:percpu_alloc_percpu"},
  };
  auto it = kCategories.find(event);
  return it == kCategories.end() ? std::string(event) : it->second;
}

size_t Count(const HookInventory& inventory, std::string_view kind, std::string_view target = "",
             std::string_view owner = "") {
  return std::count_if(inventory.hooks.begin(), inventory.hooks.end(), [&](const ForeignHook& h) {
    return h.kind == kind && (target.empty() || h.target == target) &&
           (owner.empty() || h.owner == owner);
  });
}

}  // namespace

TEST_CASE("the /proc scan finds which process holds each BPF program, link and perf event",
          "[hooks][owners]") {
  HostPaths paths(kCapture + "/proc", kCapture + "/sys");
  BpfHolderScan scan;
  scan.skip_pid = kKpathdPid;
  BpfHolders holders = ScanBpfHolders(paths, scan, RecordedQueries());
  CHECK(holders.processes_scanned == 1);
  CHECK(holders.programs.size() == 4);
  CHECK(holders.programs.at(2874) == kAgentPid);
  CHECK(holders.links.size() == 4);
  CHECK(holders.links.at(742) == kAgentPid);
  REQUIRE(holders.attachments.size() == 2);  // the tracepoint's and the uprobe's perf events
  CHECK(holders.processes.at(kAgentPid).comm == "hook_agent");
  CHECK(holders.processes.at(kAgentPid).unit.empty());

  BpfHolderScan self;
  self.only = "self";
  self.self_pid = kKpathdPid;
  BpfHolders own = ScanBpfHolders(paths, self, RecordedQueries());
  CHECK(own.processes_scanned == 1);
  CHECK(own.programs.contains(2884));  // the percpu probe
  CHECK_FALSE(own.programs.contains(2874));
}

TEST_CASE("the agent's four hooks are listed with kind, target and owner, and kpathd's are not",
          "[hooks][inventory]") {
  BpfSources bpf = CapturedBpf();
  TracingSources tracing;
  tracing.probe_events =
      ParseProbeEvents(Fixture("bpf-holders-linux-6.18.44-x86_64/uprobe_events")).events;
  HotTargets hot(DefaultHotFunctions());
  InventoryContext context{.own_pid = kKpathdPid, .hot = &hot, .qualify_tracepoint = Qualify};
  HookInventory inventory = BuildHookInventory(tracing, &bpf, context);

  INFO([&] {
    std::string all;
    for (const ForeignHook& h : inventory.hooks)
      all += h.kind + " " + h.target + " " + h.owner + "\n";
    return all;
  }());
  CHECK(inventory.hooks.size() == 4);
  CHECK(Count(inventory, "tracepoint", "sched:sched_switch", "hook_agent") == 1);
  CHECK(Count(inventory, "raw_tracepoint", "task:task_newtask", "hook_agent") == 1);
  CHECK(Count(inventory, "raw_tracepoint", "sched:sched_process_fork", "hook_agent") == 1);
  // The tracefs uprobe event and the agent's program on it are one hook, owned by the agent.
  CHECK(Count(inventory, "uprobe",
              "/work/main/build-hooks/tests/integration/agent/hook_agent:0x3130",
              "hook_agent") == 1);
  for (const ForeignHook& h : inventory.hooks) {
    CHECK(h.hot == (h.target == "sched:sched_switch"));
    CHECK(h.unit == "none");
    CHECK(h.target.find("percpu") == std::string::npos);
  }
  CHECK(inventory.hidden_kprobes == 0);
  REQUIRE(inventory.programs.size() == 4);
  for (const ForeignProgram& p : inventory.programs) CHECK(p.owner == "hook_agent");
}

TEST_CASE("without kpathd's own fds every program counts as foreign, owners intact",
          "[hooks][inventory]") {
  BpfSources bpf = CapturedBpf();
  bpf.own = BpfHolders{};
  HostPaths paths(kCapture + "/proc", kCapture + "/sys");
  bpf.foreign = ScanBpfHolders(paths, BpfHolderScan{}, RecordedQueries());
  InventoryContext context{.own_pid = 1, .hot = nullptr, .qualify_tracepoint = Qualify};
  HookInventory inventory = BuildHookInventory(TracingSources{}, &bpf, context);
  CHECK(inventory.programs.size() == 11);
  CHECK(Count(inventory, "raw_tracepoint", "percpu:percpu_alloc_percpu", "kpathd") == 1);
}

TEST_CASE(
    "seed 002 on a 4.19 kernel: hidden kprobes counted once across kprobes/list and "
    "kprobe_events, hot ones flagged",
    "[hooks][inventory][kprobes]") {
  TracingSources tracing;
  tracing.kprobe_list =
      *ParseKprobeList(Fixture("linux-4.19-x86_64/sys/kernel/debug/kprobes/list"));
  tracing.probe_events =
      ParseProbeEvents(Fixture("linux-4.19-x86_64/sys/kernel/tracing/kprobe_events")).events;
  HotTargets hot(DefaultHotFunctions());
  InventoryContext context{.own_pid = 4242, .hot = &hot, .qualify_tracepoint = {}};
  HookInventory inventory = BuildHookInventory(tracing, nullptr, context);
  CHECK(inventory.hidden_kprobes == 12);          // the two do_sys_open events are listed probes
  CHECK(inventory.hidden_kprobes_disabled == 2);  // do_execve [DISABLED], old_module_init [GONE]
  CHECK(Count(inventory, "kprobe") == 9);
  CHECK(Count(inventory, "kretprobe") == 3);
  auto hot_count = std::count_if(inventory.hooks.begin(), inventory.hooks.end(),
                                 [](const ForeignHook& h) { return h.hot; });
  CHECK(hot_count == 6);  // security_file_permission x2, vfs_read, vfs_write, do_sys_open x2
  for (const ForeignHook& h : inventory.hooks) CHECK(h.owner == "unknown");
}

TEST_CASE("kpathd's own kprobes (BPF or libbpf's legacy tracefs events) are not foreign",
          "[hooks][inventory][kprobes]") {
  TracingSources tracing;
  tracing.kprobe_list = *ParseKprobeList(
      "ffffffff812560b0  k  vfs_read+0x0    [FTRACE]\n"
      "ffffffff812560b0  k  vfs_read+0x0    [FTRACE]\n"
      "ffffffff81256a00  k  pcpu_alloc+0x0    [FTRACE]\n");
  tracing.probe_events =
      ParseProbeEvents("p:kprobes/libbpf_777_pcpu_alloc_0x0_0 pcpu_alloc\n").events;
  BpfSources bpf;
  bpf.programs = {BpfProgramInfo{.id = 10, .type = BPF_PROG_TYPE_KPROBE, .name = "mine"}};
  bpf.own.programs[10] = 777;
  bpf.own.attachments.push_back(FdAttachment{
      777, TaskFdQuery{.prog_id = 10, .fd_type = BPF_FD_TYPE_KPROBE, .name = "vfs_read"}});
  // Attached through its legacy tracefs event (no kprobe perf event source on that kernel).
  bpf.own.attachments.push_back(FdAttachment{
      777, TaskFdQuery{.prog_id = 10, .fd_type = BPF_FD_TYPE_KPROBE, .name = "pcpu_alloc"}});
  InventoryContext context{.own_pid = 777, .hot = nullptr, .qualify_tracepoint = {}};
  HookInventory inventory = BuildHookInventory(tracing, &bpf, context);
  // vfs_read: 2 listed, 1 kpathd's. pcpu_alloc: listed once, and it is kpathd's (its event is
  // named after kpathd's pid, its perf event is kpathd's).
  CHECK(Count(inventory, "kprobe", "vfs_read") == 1);
  CHECK(Count(inventory, "kprobe", "pcpu_alloc") == 0);
  CHECK(inventory.hidden_kprobes == 1);
  CHECK(inventory.programs.empty());
}

TEST_CASE("two tracefs events on one IBT-adjusted address are two hooks, both disarmed",
          "[hooks][inventory][kprobes]") {
  // From the kernel list thread on arch_adjust_kprobe_addr (X86_KERNEL_IBT moves sym+0 to +4).
  TracingSources tracing;
  tracing.kprobe_list = *ParseKprobeList(
      "ffffffff812d31e4  k  cmdline_proc_show+0x4    [DISABLED][FTRACE]\n"
      "ffffffff812d31e4  k  cmdline_proc_show+0x4    [DISABLED][FTRACE]\n");
  tracing.probe_events = ParseProbeEvents(
                             "p:kprobes/p_cmdline_proc_show_0 cmdline_proc_show\n"
                             "p:kprobes/p_cmdline_proc_show_4 cmdline_proc_show+4\n")
                             .events;
  HookInventory inventory = BuildHookInventory(tracing, nullptr, InventoryContext{});
  CHECK(inventory.hidden_kprobes == 2);
  CHECK(inventory.hidden_kprobes_disabled == 2);
}

TEST_CASE("ftrace users beyond kprobes, BPF trampolines and fprobe events count as ftrace hooks",
          "[hooks][inventory][ftrace]") {
  TracingSources tracing;
  tracing.enabled_functions =
      ParseEnabledFunctions(Fixture("linux-6.11-x86_64/sys/kernel/tracing/enabled_functions"));
  HookInventory fedora = BuildHookInventory(tracing, nullptr, InventoryContext{});
  CHECK(Count(fedora, "ftrace") == 1);  // free_user_ns; the two LSM trampolines are BPF's
  CHECK(Count(fedora, "ftrace", "free_user_ns") == 1);

  TracingSources fprobes;
  fprobes.enabled_functions =
      ParseEnabledFunctions("vfs_read (2)            ->arch_ftrace_ops_list_func+0x0/0x210\n");
  fprobes.probe_events = ParseProbeEvents(
                             "f:fprobes/event1 vfs_read\n"
                             "f:fprobes/event2 vfs_read%return\n")
                             .events;
  HookInventory both = BuildHookInventory(fprobes, nullptr, InventoryContext{});
  CHECK(Count(both, "ftrace", "vfs_read") == 2);  // the two fprobes, nothing more
}

TEST_CASE(
    "hot targets match functions without clone suffix or offset, LSM hooks and bare "
    "tracepoint names",
    "[hooks][hot]") {
  HotTargets hot({"security_file_permission", "finish_task_switch", "sched:sched_switch"});
  CHECK(hot.IsHot("kprobe", "finish_task_switch.isra.0"));
  CHECK(hot.IsHot("kretprobe", "security_file_permission+0x10"));
  CHECK(hot.IsHot("lsm", "file_permission"));
  CHECK(hot.IsHot("raw_tracepoint", "sched_switch"));
  CHECK(hot.IsHot("tracepoint", "sched:sched_switch"));
  CHECK_FALSE(hot.IsHot("tracepoint", "sched:sched_wakeup"));
  CHECK_FALSE(hot.IsHot("uprobe", "/usr/bin/bash:0x1"));
  CHECK_FALSE(hot.IsHot("kprobe", "vfs_read"));
}

TEST_CASE(
    "the collector on the 4.19 fixture tree exports kprobes, the switch and a bounded "
    "info list with hot hooks first",
    "[hooks][collector]") {
  std::string root = std::string(KPATH_FIXTURES) + "/linux-4.19-x86_64";
  ForeignHookOptions options;
  options.config.max_info_series = 3;
  options.bpf_inventory = false;
  HostPaths paths(root + "/proc", root + "/sys");
  LiveKernelFeatures kernel(paths, /*may_mount=*/false);
  ForeignHookInventory collector(paths, kernel, options);
  REQUIRE(collector.Start().ok());
  MetricFamilies families;
  REQUIRE(collector.Collect(families).ok());
  collector.Stop();
  auto value = [&](const std::string& name,
                   const std::map<std::string, std::string>& labels = {}) -> std::optional<double> {
    for (const auto& family : families) {
      if (family.name != name) continue;
      for (const auto& metric : family.metric) {
        bool match = std::all_of(labels.begin(), labels.end(), [&](const auto& want) {
          return std::any_of(metric.label.begin(), metric.label.end(), [&](const auto& l) {
            return l.name == want.first && l.value == want.second;
          });
        });
        if (match) return metric.gauge.value;
      }
    }
    return std::nullopt;
  };
  CHECK(value("kpath_hidden_kprobes") == 12);
  CHECK(value("kpath_kprobes_enabled") == 1);
  CHECK(value("kpath_foreign_hooks", {{"kind", "kprobe"}, {"hot", "true"}}) == 4);
  CHECK(value("kpath_foreign_hooks", {{"kind", "kretprobe"}, {"hot", "true"}}) == 2);
  CHECK(value("kpath_foreign_hooks", {{"kind", "fentry"}, {"hot", "false"}}) == 0);
  CHECK(value("kpath_foreign_hook_source_available", {{"source", "kprobes_list"}}) == 1);
  CHECK(value("kpath_foreign_hook_source_available", {{"source", "bpf"}}) == 0);
  // 12 hooks, each its own series: 3 kept, all of them hot, and 9 counted as omitted.
  size_t info_series = 0;
  for (const auto& family : families) {
    if (family.name != "kpath_foreign_hook_info") continue;
    info_series = family.metric.size();
    for (const auto& metric : family.metric) {
      bool hot = std::any_of(metric.label.begin(), metric.label.end(),
                             [](const auto& l) { return l.name == "hot" && l.value == "true"; });
      CHECK(hot);
    }
  }
  CHECK(info_series == 3);
  CHECK(value("kpath_foreign_hook_info_omitted") == 9);
  // The set is one series over all 12 hooks, the 9 left out of the list included.
  std::map<std::string, std::string> set_labels;
  size_t set_series = 0;
  for (const auto& family : families) {
    if (family.name != "kpath_foreign_hook_set_info") continue;
    set_series = family.metric.size();
    for (const auto& metric : family.metric) {
      CHECK(metric.gauge.value == 1);
      for (const auto& label : metric.label) set_labels[label.name] = label.value;
    }
  }
  CHECK(set_series == 1);
  CHECK(set_labels["hooks"] == "12");
  CHECK(set_labels["fingerprint"] == FingerprintHookSet(collector.inventory().hooks).Hex());
  CHECK(set_labels["fingerprint"] != FingerprintHookSet({}).Hex());
  CHECK(collector.StatusFragment() == "12 foreign hooks (6 hot), 12 hidden kprobes");
}

// Issue 19 (D7): an _info family is 1. Two tracefs kprobes on vfs_read (the same kind, target,
// owner and unit) are one kpath_foreign_hook_info series of value 1, and two hooks counted.
TEST_CASE("identical foreign hooks share one info series of value 1", "[hooks][collector]") {
  namespace fs = std::filesystem;
  // Appended in steps: GCC 12 at -O3 reports a false -Wrestrict on "x" + std::to_string (GCC bug
  // 105329; docs/development.md).
  std::string name = "kpath-hooks-identical-";
  name += std::to_string(getpid());
  const fs::path root = fs::temp_directory_path() / name;
  fs::remove_all(root);
  struct RemovedAtEnd {  // also when a REQUIRE below fails
    fs::path path;
    ~RemovedAtEnd() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } copy{root};
  fs::copy(std::string(KPATH_FIXTURES) + "/linux-4.19-x86_64", root, fs::copy_options::recursive);
  std::ofstream(root / "sys/kernel/debug/kprobes/list", std::ios::trunc)
      << "ffffffff8a2795d0  k  vfs_read+0x0    [FTRACE]\n"
         "ffffffff8a2795d0  k  vfs_read+0x0    [FTRACE]\n";
  std::ofstream(root / "sys/kernel/tracing/kprobe_events", std::ios::trunc)
      << "p:kprobes/first vfs_read\np:kprobes/second vfs_read\n";
  ForeignHookOptions options;
  options.bpf_inventory = false;
  HostPaths paths((root / "proc").string(), (root / "sys").string());
  LiveKernelFeatures kernel(paths, /*may_mount=*/false);
  MetricFamilies families;
  {
    ForeignHookInventory collector(paths, kernel, options);
    REQUIRE(collector.Start().ok());
    REQUIRE(collector.Collect(families).ok());
    collector.Stop();
  }
  std::vector<double> info, hot_kprobes;
  for (const auto& family : families) {
    for (const auto& metric : family.metric) {
      if (family.name == "kpath_foreign_hook_info") info.push_back(metric.gauge.value);
      bool kprobe_hot = family.name == "kpath_foreign_hooks" &&
                        std::any_of(metric.label.begin(), metric.label.end(),
                                    [](const auto& l) { return l.value == "kprobe"; }) &&
                        std::any_of(metric.label.begin(), metric.label.end(), [](const auto& l) {
                          return l.name == "hot" && l.value == "true";
                        });
      if (kprobe_hot) hot_kprobes.push_back(metric.gauge.value);
    }
  }
  CHECK(hot_kprobes == std::vector<double>{2});
  CHECK(info == std::vector<double>{1});
}

TEST_CASE("sampled BPF statistics estimate a steady program's cost over the whole period",
          "[hooks][cost]") {
  // A program that costs 1 ms of CPU per second of wall time, while the statistics are on.
  auto start = std::chrono::steady_clock::now();
  std::atomic<int> enables{0};
  BpfStatsSampler::ReadAll read = [&] {
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::map<uint32_t, BpfStatsSampler::Reading>{
        {7, {static_cast<uint64_t>(seconds * 1e6), static_cast<uint64_t>(seconds * 1000)}}};
  };
  BpfStatsSampler::EnableStats enable = [&] {
    ++enables;
    int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // stands in for the statistics fd
    return fd >= 0 ? fd : -errno;
  };
  // A procfs without bpf_stats_enabled: the sysctl reads as off.
  std::filesystem::path empty = std::filesystem::temp_directory_path() / "kpath-hooks-empty-proc";
  std::filesystem::create_directories(empty);
  BpfStatsSampler sampler(HostPaths(empty, empty), absl::Milliseconds(200), absl::Milliseconds(50),
                          read, enable);
  sampler.Start();
  std::this_thread::sleep_for(1100ms);
  sampler.Stop();
  std::map<uint32_t, BpfStatsSampler::Estimate> estimates = sampler.Take();
  std::filesystem::remove_all(empty);
  REQUIRE(estimates.contains(7));
  uint64_t slices = sampler.Slices();
  REQUIRE(slices >= 3);
  CHECK(enables.load() >= 3);
  // Each slice stands for the time since the previous slice ended (the first for one period):
  // about slices x 200 ms of cost at 1 ms/s.
  double expected_ns = static_cast<double>(slices) * 0.2 * 1e6;
  CHECK(estimates[7].run_time_ns == Approx(expected_ns).epsilon(0.25));
  CHECK(estimates[7].run_count == Approx(expected_ns / 1000).epsilon(0.25));
}

TEST_CASE("the sampler leaves the statistics alone while the sysctl has them on", "[hooks][cost]") {
  std::filesystem::path proc = std::filesystem::temp_directory_path() / "kpath-hooks-stats-on";
  std::filesystem::create_directories(proc / "sys/kernel");
  std::ofstream(proc / "sys/kernel/bpf_stats_enabled") << "1\n";
  std::atomic<int> enables{0};
  BpfStatsSampler sampler(
      HostPaths(proc, proc), absl::Milliseconds(100), absl::Milliseconds(20),
      [] { return std::map<uint32_t, BpfStatsSampler::Reading>{}; },
      [&] {
        ++enables;
        return -EPERM;
      });
  sampler.Start();
  std::this_thread::sleep_for(400ms);
  sampler.Stop();
  std::filesystem::remove_all(proc);
  CHECK(enables.load() == 0);
  CHECK(sampler.Take().empty());
}

// Issue 22: the fingerprint of a node's hook set, over the inventories of the fixtures above.
namespace {

HookInventory Seed002Inventory(std::string_view extra_kprobes = "") {
  TracingSources tracing;
  tracing.kprobe_list = *ParseKprobeList(
      Fixture("linux-4.19-x86_64/sys/kernel/debug/kprobes/list") + std::string(extra_kprobes));
  tracing.probe_events =
      ParseProbeEvents(Fixture("linux-4.19-x86_64/sys/kernel/tracing/kprobe_events")).events;
  return BuildHookInventory(tracing, nullptr, InventoryContext{.own_pid = 4242});
}

HookInventory CapturedInventory(const BpfSources& bpf) {
  TracingSources tracing;
  tracing.probe_events =
      ParseProbeEvents(Fixture("bpf-holders-linux-6.18.44-x86_64/uprobe_events")).events;
  InventoryContext context{.own_pid = kKpathdPid, .hot = nullptr, .qualify_tracepoint = Qualify};
  return BuildHookInventory(tracing, &bpf, context);
}

// The fingerprint of a host whose only hooks are these tracefs dynamic events.
HookSetFingerprint EventsFingerprint(const std::string& events) {
  TracingSources tracing;
  tracing.probe_events = ParseProbeEvents(events).events;
  return FingerprintHookSet(BuildHookInventory(tracing, nullptr, InventoryContext{}).hooks);
}

// The capture as it would read after the agent restarted: another pid, other program and link
// ids, another (transient) unit.
BpfSources AgentRestarted(BpfSources bpf, pid_t pid, uint32_t id_shift) {
  auto shift = [&](std::map<uint32_t, pid_t>& holders) {
    std::map<uint32_t, pid_t> out;
    for (auto [id, holder] : holders) {
      if (holder == kAgentPid) {
        out[id + id_shift] = pid;
      } else {
        out[id] = holder;
      }
    }
    holders = std::move(out);
  };
  std::set<uint32_t> agent_programs;
  for (const auto& [id, holder] : bpf.foreign.programs) {
    if (holder == kAgentPid) agent_programs.insert(id);
  }
  for (const FdAttachment& a : bpf.foreign.attachments) {
    if (a.pid == kAgentPid) agent_programs.insert(a.query.prog_id);
  }
  for (BpfLinkInfo& link : bpf.links) {
    if (bpf.foreign.links.contains(link.id) && bpf.foreign.links.at(link.id) == kAgentPid) {
      agent_programs.insert(link.prog_id);
      link.id += id_shift;
    }
  }
  for (BpfLinkInfo& link : bpf.links) {
    if (agent_programs.contains(link.prog_id)) link.prog_id += id_shift;
  }
  for (BpfProgramInfo& program : bpf.programs) {
    if (agent_programs.contains(program.id)) program.id += id_shift;
  }
  shift(bpf.foreign.programs);
  shift(bpf.foreign.links);
  for (FdAttachment& a : bpf.foreign.attachments) {
    if (a.pid != kAgentPid) continue;
    a.pid = pid;
    a.query.prog_id += id_shift;
  }
  ProcessIdentity agent = bpf.foreign.processes.at(kAgentPid);
  agent.unit = "run-r7f3.scope";
  bpf.foreign.processes.erase(kAgentPid);
  bpf.foreign.processes[pid] = agent;
  return bpf;
}

}  // namespace

TEST_CASE("the hook-set fingerprint is FNV-1a of the sorted distinct (kind, target, owner)",
          "[hooks][fingerprint]") {
  // Values computed outside kpathd (a few lines of Python, docs/metrics.md): they must never
  // change, or every node of a fleet changes its fingerprint on upgrading kpathd.
  CHECK(FingerprintHookSet({}).Hex() == "cbf29ce484222325");
  CHECK(FingerprintHookSet({}).hooks == 0);
  std::vector<ForeignHook> golden = {
      {.kind = "uprobe", .target = "/usr/bin/bash:0xc6c20", .owner = "unknown", .unit = "none"}};
  CHECK(FingerprintHookSet(golden).Hex() == "6c4881ad35b20d28");
  std::vector<ForeignHook> seed002 = {
      {.kind = "kretprobe", .target = "security_file_permission", .owner = "cloudwalker-agent"},
      {.kind = "kprobe", .target = "tcp_sendmsg", .owner = "cloudwalker-agent"}};
  HookSetFingerprint two = FingerprintHookSet(seed002);
  CHECK(two.Hex() == "de0810e14b74e5ac");
  CHECK(two.hooks == 2);
}

TEST_CASE("the fingerprint of seed 002's hooks does not depend on the order they are found in",
          "[hooks][fingerprint]") {
  HookInventory inventory = Seed002Inventory();
  HookSetFingerprint fingerprint = FingerprintHookSet(inventory.hooks);
  // 12 hooks; the k and r on do_sys_open are both a listed probe and a tracefs event: one each.
  CHECK(fingerprint.hooks == 12);

  std::vector<ForeignHook> reversed(inventory.hooks.rbegin(), inventory.hooks.rend());
  CHECK(FingerprintHookSet(reversed).value == fingerprint.value);
  std::vector<ForeignHook> rotated = inventory.hooks;
  std::rotate(rotated.begin(), rotated.begin() + 5, rotated.end());
  CHECK(FingerprintHookSet(rotated).value == fingerprint.value);

  // The kernel lists the same probes in another order (another boot, another registration order).
  std::string list = Fixture("linux-4.19-x86_64/sys/kernel/debug/kprobes/list");
  std::vector<std::string> lines = absl::StrSplit(list, '\n', absl::SkipEmpty());
  std::reverse(lines.begin(), lines.end());
  TracingSources tracing;
  tracing.kprobe_list = *ParseKprobeList(absl::StrJoin(lines, "\n"));
  tracing.probe_events =
      ParseProbeEvents(Fixture("linux-4.19-x86_64/sys/kernel/tracing/kprobe_events")).events;
  std::reverse(tracing.probe_events.begin(), tracing.probe_events.end());
  HookInventory other_order = BuildHookInventory(tracing, nullptr, InventoryContext{});
  CHECK(FingerprintHookSet(other_order.hooks).value == fingerprint.value);
}

TEST_CASE("a new hook changes the fingerprint; another copy of a hook already there does not",
          "[hooks][fingerprint]") {
  HookSetFingerprint before = FingerprintHookSet(Seed002Inventory().hooks);
  HookSetFingerprint added = FingerprintHookSet(
      Seed002Inventory("ffffffff8a3c2f00  k  tcp_sendmsg+0x0    [FTRACE]\n").hooks);
  CHECK(added.value != before.value);
  CHECK(added.hooks == before.hooks + 1);
  // A second kprobe on vfs_read: two hooks in kpath_foreign_hooks, the same set.
  HookSetFingerprint again =
      FingerprintHookSet(Seed002Inventory("ffffffff8a2795d0  k  vfs_read+0x0    [FTRACE]\n").hooks);
  CHECK(again.value == before.value);
  CHECK(again.hooks == before.hooks);
  // The same hook under another owner is another set.
  std::vector<ForeignHook> hooks = Seed002Inventory().hooks;
  hooks.front().owner = "falcon-sensor";
  CHECK(FingerprintHookSet(hooks).value != before.value);
}

TEST_CASE("kpathd's own hooks leave the fingerprint as it is without kpathd",
          "[hooks][fingerprint]") {
  BpfSources with_kpathd = CapturedBpf();
  // The same host with no kpathd: its programs and links were never loaded.
  std::set<uint32_t> own_programs, own_links;
  for (const auto& [id, pid] : with_kpathd.own.programs) own_programs.insert(id);
  for (const auto& [id, pid] : with_kpathd.own.links) own_links.insert(id);
  for (const FdAttachment& a : with_kpathd.own.attachments) own_programs.insert(a.query.prog_id);
  for (const BpfLinkInfo& link : with_kpathd.links) {
    if (own_links.contains(link.id)) own_programs.insert(link.prog_id);
  }
  REQUIRE(own_programs.size() == 7);  // the capture's kpathd: 7 of the 11 programs
  BpfSources without_kpathd = with_kpathd;
  std::erase_if(without_kpathd.programs,
                [&](const BpfProgramInfo& p) { return own_programs.contains(p.id); });
  std::erase_if(without_kpathd.links,
                [&](const BpfLinkInfo& l) { return own_links.contains(l.id); });
  without_kpathd.own = BpfHolders{};

  HookSetFingerprint with = FingerprintHookSet(CapturedInventory(with_kpathd).hooks);
  HookSetFingerprint without = FingerprintHookSet(CapturedInventory(without_kpathd).hooks);
  CHECK(with.hooks == 4);  // the agent's four
  CHECK(with.value == without.value);

  // Were kpathd's programs not recognised as its own, they would change the set.
  BpfSources unrecognised = with_kpathd;
  unrecognised.own = BpfHolders{};
  CHECK(FingerprintHookSet(CapturedInventory(unrecognised).hooks).value != with.value);
}

TEST_CASE("a restarted agent (new pid, program and link ids, unit) keeps the fingerprint",
          "[hooks][fingerprint]") {
  BpfSources before = CapturedBpf();
  BpfSources after = AgentRestarted(before, 52817, 1000);
  HookInventory first = CapturedInventory(before);
  HookInventory second = CapturedInventory(after);
  // The restart did change what the inventory holds beyond the set.
  REQUIRE(second.hooks.size() == first.hooks.size());
  CHECK(std::none_of(second.hooks.begin(), second.hooks.end(), [&](const ForeignHook& h) {
    return std::any_of(first.hooks.begin(), first.hooks.end(), [&](const ForeignHook& g) {
      return g.prog_id == h.prog_id || g.unit == h.unit;
    });
  }));
  CHECK(FingerprintHookSet(second.hooks).value == FingerprintHookSet(first.hooks).value);

  // bcc names its legacy tracefs event after its pid (Amazon Linux 2, 4.14): a new bcc process,
  // the same hook.
  std::string bcc = Fixture("linux-4.14-x86_64/sys/kernel/debug/tracing/kprobe_events");
  REQUIRE(bcc.find("bcc_2566") != std::string::npos);
  std::string rerun = std::regex_replace(bcc, std::regex("bcc_2566"), "bcc_31337");
  CHECK(EventsFingerprint(bcc).hooks == 1);
  CHECK(EventsFingerprint(rerun).value == EventsFingerprint(bcc).value);
}

TEST_CASE("a kprobe on a raw address counts by kind and owner, not by its KASLR-moved address",
          "[hooks][fingerprint]") {
  // One boot and the next: the same function, another base address.
  HookSetFingerprint boot1 = EventsFingerprint("p:kprobes/at_addr 0xffffffff81234560\n");
  HookSetFingerprint boot2 = EventsFingerprint("p:kprobes/at_addr 0xffffffffa7634560\n");
  CHECK(boot1.hooks == 1);
  CHECK(boot1.value == boot2.value);
  CHECK(boot1.value != EventsFingerprint("r:kprobes/at_addr 0xffffffff81234560\n").value);
}
