// What kpathd keeps of its capabilities after start, and the capget/capset plumbing.
#include "daemon/least_privilege.h"

#include <linux/capability.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace kpath {
namespace {

CapabilitySet Required(const std::vector<CapabilityNeed>& needs) {
  return ResolveNeeds(needs, [](const CapabilityNeed&, CapabilitySet) { return false; });
}

TEST_CASE("capability sets print as capsh and systemd spell them") {
  CHECK(CapabilitySet().ToString() == "none");
  CHECK(CapabilitySet::Of({CAP_SYS_ADMIN, CAP_BPF, CAP_DAC_READ_SEARCH}).ToString() ==
        "cap_dac_read_search,cap_sys_admin,cap_bpf");
  CHECK(CapabilitySet(0x1fffeffffffULL).List().size() == 40);
  CHECK(CapabilityName(CAP_CHECKPOINT_RESTORE) == "cap_checkpoint_restore");
  CHECK(CapabilityName(45) == "cap_45");
  CHECK((CapabilitySet::Of({1, 2, 3}) - CapabilitySet::Of({2})) == CapabilitySet::Of({1, 3}));
}

TEST_CASE("the default configuration keeps what sampling, kallsyms and the hook inventory need") {
  SteadyStateWork work{.bpf_maps = true,
                       .names_kernel_addresses = true,
                       .perf_event_timers = true,
                       .foreign_bpf_inventory = true};
  const std::vector<CapabilityNeed> needs = SteadyStateNeeds(work, CAP_CHECKPOINT_RESTORE);
  CHECK(Required(needs) == CapabilitySet::Of({CAP_BPF, CAP_SYSLOG, CAP_PERFMON, CAP_SYS_ADMIN,
                                              CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH}));
  // Never kept once probes are attached: raising RLIMIT_MEMLOCK, writing files, module loading.
  for (int dropped : {CAP_SYS_RESOURCE, CAP_DAC_OVERRIDE, CAP_SYS_MODULE, CAP_NET_ADMIN, CAP_SETUID,
                      CAP_KILL, CAP_CHOWN}) {
    CHECK_FALSE(Required(needs).Has(dropped));
  }
}

TEST_CASE(
    "probes that may be attached again keep CAP_BPF and CAP_PERFMON whatever the kernel says") {
  SteadyStateWork work{.bpf_maps = true, .reattaches_probes = true};
  std::vector<int> asked;
  auto perf_event_open_works = [&](bool works) {
    return [&asked, works](const CapabilityNeed& need, CapabilitySet candidate) {
      asked.push_back(need.capability);
      // Asked only whether a perf event opens without CAP_SYS_ADMIN, with CAP_PERFMON.
      CHECK(need.check == CapabilityNeed::Check::kPerfEventOpen);
      CHECK(candidate.Has(CAP_PERFMON));
      return works;
    };
  };
  CHECK(ResolveNeeds(SteadyStateNeeds(work, CAP_CHECKPOINT_RESTORE), perf_event_open_works(true)) ==
        CapabilitySet::Of({CAP_BPF, CAP_PERFMON}));
  CHECK(asked == std::vector<int>{CAP_SYS_ADMIN});
  // Debian's and Ubuntu's kernels at kernel.perf_event_paranoid 3 and above: CAP_SYS_ADMIN stays.
  asked.clear();
  CHECK(
      ResolveNeeds(SteadyStateNeeds(work, CAP_CHECKPOINT_RESTORE), perf_event_open_works(false)) ==
      CapabilitySet::Of({CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN}));
  CHECK(asked == std::vector<int>{CAP_SYS_ADMIN});
}

TEST_CASE("without the hook inventory, CAP_SYS_ADMIN, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH go") {
  SteadyStateWork work{.bpf_maps = true, .names_kernel_addresses = true};
  CHECK(Required(SteadyStateNeeds(work, CAP_CHECKPOINT_RESTORE)) ==
        CapabilitySet::Of({CAP_BPF, CAP_SYSLOG}));
  CHECK(Required(SteadyStateNeeds(SteadyStateWork{}, CAP_CHECKPOINT_RESTORE)).empty());
  // Unmounting what kpathd mounted at start needs CAP_SYS_ADMIN at exit.
  CHECK(Required(SteadyStateNeeds(SteadyStateWork{.mounted_tracing_fs = true},
                                  CAP_CHECKPOINT_RESTORE)) == CapabilitySet::Of({CAP_SYS_ADMIN}));
}

TEST_CASE("before Linux 5.8, CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON") {
  SteadyStateWork work{.bpf_maps = true, .perf_event_timers = true};
  CHECK(Required(SteadyStateNeeds(work, CAP_AUDIT_READ)) == CapabilitySet::Of({CAP_SYS_ADMIN}));
}

TEST_CASE("the kernel is asked about CAP_BPF and CAP_SYSLOG, never about the others") {
  SteadyStateWork work{
      .bpf_maps = true, .names_kernel_addresses = true, .foreign_bpf_inventory = true};
  std::vector<int> asked;
  CapabilitySet keep = ResolveNeeds(SteadyStateNeeds(work, CAP_CHECKPOINT_RESTORE),
                                    [&](const CapabilityNeed& need, CapabilitySet candidate) {
                                      asked.push_back(need.capability);
                                      CHECK_FALSE(candidate.Has(need.capability));
                                      CHECK(candidate.Has(CAP_SYS_ADMIN));
                                      // CAP_SYS_ADMIN reads BPF maps; kallsyms hides its addresses
                                      // without CAP_SYSLOG.
                                      return need.check == CapabilityNeed::Check::kBpfMapRead;
                                    });
  CHECK(asked == std::vector<int>{CAP_SYSLOG, CAP_BPF});
  CHECK(keep ==
        CapabilitySet::Of({CAP_SYSLOG, CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH}));
}

TEST_CASE("a capability that one need requires outright is not asked about") {
  std::vector<CapabilityNeed> needs = {
      {CAP_SYS_ADMIN, "a", CapabilityNeed::Check::kBpfMapRead},
      {CAP_SYS_ADMIN, "b", CapabilityNeed::Check::kNone},
  };
  int asked = 0;
  CHECK(ResolveNeeds(needs, [&](const CapabilityNeed&, CapabilitySet) { return ++asked, true; }) ==
        CapabilitySet::Of({CAP_SYS_ADMIN}));
  CHECK(asked == 0);
}

TEST_CASE("LimitThisThread limits the calling thread only") {
  const ThreadCapabilities before = CurrentThreadCapabilities();
  ThreadCapabilities inside;
  std::thread([&] {
    REQUIRE(LimitThisThread(CapabilitySet::Of({CAP_SYSLOG})).ok());
    inside = CurrentThreadCapabilities();
  }).join();
  CHECK((inside.permitted - CapabilitySet::Of({CAP_SYSLOG})).empty());
  CHECK(inside.effective == inside.permitted);
  CHECK(CurrentThreadCapabilities().permitted == before.permitted);
  // RunOnThreadLimitedTo: the same, with the work's result back.
  const CapabilitySet seen =
      RunOnThreadLimitedTo(CapabilitySet(), [] { return CurrentThreadCapabilities().permitted; });
  CHECK(seen.empty());
}

// In a child process, so the test binary keeps its own capabilities.
TEST_CASE("LimitEveryThread reaches every thread, including ones blocked in a system call") {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&] {
        while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      });
    }
    const CapabilitySet keep = CapabilitySet::Of({CAP_SYSLOG});
    int status = LimitEveryThread(keep).ok() ? 0 : 1;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream in(task.path() / "status");
      for (std::string line; std::getline(in, line);) {
        if (line.starts_with("CapPrm:") &&
            !(CapabilitySet(std::stoull(line.substr(7), nullptr, 16)) - keep).empty()) {
          status = 2;
        }
        if (line.starts_with("NoNewPrivs:") && line.find('1') == std::string::npos) status = 3;
      }
    }
    stop = true;
    for (std::thread& t : threads) t.join();
    _exit(status);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace kpath
