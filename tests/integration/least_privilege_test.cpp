// kpathd gives up the capabilities it needs only to attach once its probes are attached, in
// every thread, and goes on serving and counting. Figures are printed as "[privileges] ...".
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <thread>

#include "support/cgroup_churn.h"
#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

uint64_t Bit(int capability) { return uint64_t{1} << capability; }

// "CapEff", "CapPrm", ... of /proc/<pid>[/task/<tid>]/status, and the thread's name.
struct Status {
  std::map<std::string, uint64_t> caps;
  std::string name;
  bool no_new_privs = false;
};

Status ReadStatus(const std::filesystem::path& status_file) {
  Status out;
  std::ifstream in(status_file);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    const std::string value = start == std::string::npos ? "" : line.substr(start);
    if (key.starts_with("Cap")) out.caps[key] = std::stoull(value, nullptr, 16);
    if (key == "Name") out.name = value;
    if (key == "NoNewPrivs") out.no_new_privs = value == "1";
  }
  return out;
}

uint64_t ReadSysctl(const char* path) {
  std::ifstream in(path);
  uint64_t value = 0;
  in >> value;
  return value;
}

// What the kernel shows of /proc/kallsyms without CAP_SYSLOG decides whether kpathd keeps it.
bool KallsymsNeedsSyslog() {
  return !(ReadSysctl("/proc/sys/kernel/kptr_restrict") == 0 &&
           ReadSysctl("/proc/sys/kernel/perf_event_paranoid") <= 1);
}

// Whether this kernel refuses a CPU-wide perf event to CAP_PERFMON without CAP_SYS_ADMIN (the
// patch of Debian's and Ubuntu's kernels, at kernel.perf_event_paranoid above 2): asked in a
// child with CAP_SYS_ADMIN out of its effective set.
bool PerfEventsNeedSysAdmin() {
  pid_t pid = fork();
  if (pid == 0) {
    __user_cap_header_struct header{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &header, data) != 0) _exit(2);
    data[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
    if (syscall(SYS_capset, &header, data) != 0) _exit(2);
    perf_event_attr attr{};
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof(attr);
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.disabled = 1;
    _exit(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC) >= 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

std::string Hex(uint64_t v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace

TEST_CASE("after attaching, kpathd keeps only what sampling and the hook inventory need",
          "[privileges]") {
  REQUIRE(IsRoot());
  const Status self = ReadStatus("/proc/self/status");
  KpathdProcess kpathd(
      {.config_yaml = "sampling_interval: 500ms\nhooks:\n  refresh_interval: 1s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  const std::string first = *kpathd.Scrape();
  const Status daemon = ReadStatus("/proc/" + std::to_string(kpathd.pid()) + "/status");

  // Probes may be attached again (the collector set retries them): CAP_BPF, CAP_PERFMON; the
  // hook inventory: CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH; kallsyms: CAP_SYSLOG.
  uint64_t expected = Bit(CAP_BPF) | Bit(CAP_PERFMON) | Bit(CAP_SYS_ADMIN) | Bit(CAP_SYS_PTRACE) |
                      Bit(CAP_DAC_READ_SEARCH);
  if (KallsymsNeedsSyslog()) expected |= Bit(CAP_SYSLOG);
  std::cout << "[privileges] CapEff of the test (root) " << Hex(self.caps.at("CapEff"))
            << ", of kpathd after start " << Hex(daemon.caps.at("CapEff")) << " (expected "
            << Hex(expected) << ")\n";
  INFO(kpathd.Output());
  CHECK(Hex(daemon.caps.at("CapEff")) == Hex(expected & self.caps.at("CapEff")));
  CHECK(daemon.caps.at("CapPrm") == daemon.caps.at("CapEff"));
  CHECK(daemon.caps.at("CapInh") == 0);
  CHECK(daemon.caps.at("CapAmb") == 0);
  CHECK(daemon.no_new_privs);
  // What start needed and running does not (RLIMIT_MEMLOCK), and root's others.
  for (int gone : {CAP_SYS_RESOURCE, CAP_DAC_OVERRIDE, CAP_SYS_MODULE, CAP_NET_ADMIN, CAP_SETUID,
                   CAP_KILL, CAP_CHOWN, CAP_FOWNER, CAP_SETPCAP, CAP_SYS_RAWIO}) {
    INFO("capability " << gone);
    CHECK((daemon.caps.at("CapEff") & Bit(gone)) == 0);
  }
  CHECK(kpathd.Output().find("capabilities after start: ") != std::string::npos);

  // Every thread: none above the main thread's set; civetweb's threads have none at all.
  int threads = 0;
  int web_threads = 0;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(kpathd.pid()) + "/task")) {
    const Status thread = ReadStatus(task.path() / "status");
    INFO("thread " << task.path().filename().string() << " " << thread.name);
    ++threads;
    CHECK((thread.caps.at("CapPrm") & ~daemon.caps.at("CapPrm")) == 0);
    if (thread.name.starts_with("civetweb")) {
      ++web_threads;
      CHECK(thread.caps.at("CapPrm") == 0);
    }
  }
  std::cout << "[privileges] " << threads << " threads checked, " << web_threads
            << " of them civetweb's with no capability\n";
  CHECK(web_threads > 100);  // the master and web.max_connections (128) workers

  // /metrics keeps working and the probes keep counting: memory cgroups created now are seen.
  std::optional<std::string> root = MemoryCgroupRoot();
  REQUIRE(root);
  const double before = SumMetric(first, "kpath_cgroup_mkdir_total");
  REQUIRE(ChurnCgroups(*root, "kpath-capcheck", 20) == 20);
  double after = before;
  for (int i = 0; i < 40 && after < before + 20; ++i) {
    std::this_thread::sleep_for(250ms);
    after = SumMetric(*kpathd.Scrape(), "kpath_cgroup_mkdir_total");
  }
  std::cout << "[privileges] kpath_cgroup_mkdir_total " << before << " -> " << after
            << " after 20 mkdirs\n";
  CHECK(after >= before + 20);
  // The hook inventory refreshed without its capabilities going missing.
  std::this_thread::sleep_for(1500ms);
  const std::string later = *kpathd.Scrape();
  CHECK(MetricValue(later, "kpath_collector_success", {{"collector", "foreign_hooks"}}) == 1);
  CHECK(SumMetric(later, "kpath_collector_success") == SumMetric(first, "kpath_collector_success"));
}

TEST_CASE("with the hook inventory off, CAP_SYS_ADMIN, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH go",
          "[privileges]") {
  // (CAP_SYS_ADMIN stays where the kernel opens perf events to it alone: Debian's 6.1.)
  REQUIRE(IsRoot());
  // tracefs mounted beforehand, as systemd's sys-kernel-tracing.mount does on every host: a
  // kpathd that has to mount it keeps CAP_SYS_ADMIN to unmount it at exit, which is not this case.
  const std::vector<std::string> mounts = TraceMounts();
  const bool mounted_here =
      std::find(mounts.begin(), mounts.end(), "/sys/kernel/tracing") == mounts.end();
  if (mounted_here) REQUIRE(mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0);
  struct Unmount {
    bool on;
    ~Unmount() {
      if (on) umount2("/sys/kernel/tracing", MNT_DETACH);
    }
  } unmount{mounted_here};
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 500ms\nhooks:\n  enabled: false\n"});
  REQUIRE(kpathd.WaitUntilServing());
  const Status daemon = ReadStatus("/proc/" + std::to_string(kpathd.pid()) + "/status");
  std::cout << "[privileges] CapEff of kpathd with hooks.enabled false: "
            << Hex(daemon.caps.at("CapEff")) << "\n";
  INFO(kpathd.Output());
  // Kernels before 5.8 (4.19) have no CAP_BPF or CAP_PERFMON (cap_last_cap is below them):
  // there bpf() and perf events need CAP_SYS_ADMIN, which kpathd then keeps.
  int cap_last_cap = 0;
  std::ifstream("/proc/sys/kernel/cap_last_cap") >> cap_last_cap;
  const bool bpf_caps = cap_last_cap >= CAP_BPF;
  uint64_t expected = bpf_caps ? Bit(CAP_BPF) | Bit(CAP_PERFMON) : Bit(CAP_SYS_ADMIN);
  if (KallsymsNeedsSyslog()) expected |= Bit(CAP_SYSLOG);
  const bool perf_needs_sys_admin = PerfEventsNeedSysAdmin() || !bpf_caps;
  if (perf_needs_sys_admin) expected |= Bit(CAP_SYS_ADMIN);
  CHECK(Hex(daemon.caps.at("CapEff")) == Hex(expected));
  for (int gone : {CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH}) {
    if (gone == CAP_SYS_ADMIN && perf_needs_sys_admin) continue;
    CHECK((daemon.caps.at("CapEff") & Bit(gone)) == 0);
  }
  // Sampling goes on: two scrapes a few samples apart, every collector still succeeding.
  const std::string first = *kpathd.Scrape();
  std::this_thread::sleep_for(1500ms);
  const std::string later = *kpathd.Scrape();
  CHECK(SumMetric(later, "kpath_collector_success") == SumMetric(first, "kpath_collector_success"));
  CHECK(SumMetric(later, "kpath_percpu_allocs_total") >=
        SumMetric(first, "kpath_percpu_allocs_total"));
}
