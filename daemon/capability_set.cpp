#include "daemon/capability_set.h"

#include <dirent.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kpath {
namespace {

constexpr std::array<const char*, 41> kNames = {"chown",
                                                "dac_override",
                                                "dac_read_search",
                                                "fowner",
                                                "fsetid",
                                                "kill",
                                                "setgid",
                                                "setuid",
                                                "setpcap",
                                                "linux_immutable",
                                                "net_bind_service",
                                                "net_broadcast",
                                                "net_admin",
                                                "net_raw",
                                                "ipc_lock",
                                                "ipc_owner",
                                                "sys_module",
                                                "sys_rawio",
                                                "sys_chroot",
                                                "sys_ptrace",
                                                "sys_pacct",
                                                "sys_admin",
                                                "sys_boot",
                                                "sys_nice",
                                                "sys_resource",
                                                "sys_time",
                                                "sys_tty_config",
                                                "mknod",
                                                "lease",
                                                "audit_write",
                                                "audit_control",
                                                "setfcap",
                                                "mac_override",
                                                "mac_admin",
                                                "syslog",
                                                "wake_alarm",
                                                "block_suspend",
                                                "audit_read",
                                                "perfmon",
                                                "bpf",
                                                "checkpoint_restore"};

using CapData = std::array<__user_cap_data_struct, _LINUX_CAPABILITY_U32S_3>;

// The raw system calls: async-signal-safe, so a signal handler may use them.
int CapGet(CapData& data) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return static_cast<int>(syscall(SYS_capget, &header, data.data()));
}

int CapSet(CapData& data) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return static_cast<int>(syscall(SYS_capset, &header, data.data()));
}

uint64_t Join(uint32_t low, uint32_t high) { return low | (uint64_t{high} << 32); }

// Returns 0 or an errno; async-signal-safe.
int LimitCallingThread(uint64_t keep) {
  CapData data{};
  if (CapGet(data) != 0) return errno;
  const uint64_t next = Join(data[0].permitted, data[1].permitted) & keep;
  for (size_t i = 0; i < data.size(); ++i) {
    data[i].permitted = data[i].effective = static_cast<uint32_t>(next >> (32 * i));
    data[i].inheritable = 0;
  }
  if (CapSet(data) != 0) return errno;
  // Ambient capabilities exist from Linux 4.3 (EINVAL before: there are none to clear).
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  // Without it, an execve by uid 0 would get the whole bounding set back.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  return 0;
}

std::atomic<uint64_t> g_keep{0};
std::atomic<int> g_acknowledged{0};
std::atomic<int> g_failed{0};

void LimitOnSignal(int) {
  const int saved = errno;
  if (LimitCallingThread(g_keep.load()) != 0) g_failed.fetch_add(1);
  g_acknowledged.fetch_add(1);
  errno = saved;
}

std::vector<pid_t> ThreadIds() {
  std::vector<pid_t> tids;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return tids;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9')
      tids.push_back(std::atoi(entry->d_name));
  }
  closedir(dir);
  return tids;
}

// A thread's permitted set from /proc; nullopt once it has exited.
std::optional<CapabilitySet> ThreadPermitted(pid_t tid) {
  std::ifstream status(absl::StrCat("/proc/self/task/", tid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("CapPrm:")) {
      return CapabilitySet(std::strtoull(line.c_str() + 7, nullptr, 16));
    }
  }
  return std::nullopt;
}

std::string ThreadName(pid_t tid) {
  std::ifstream comm(absl::StrCat("/proc/self/task/", tid, "/comm"));
  std::string name;
  std::getline(comm, name);
  return name;
}

}  // namespace

CapabilitySet CapabilitySet::Of(std::initializer_list<int> capabilities) {
  CapabilitySet set;
  for (int c : capabilities) set = set.With(c);
  return set;
}

std::vector<int> CapabilitySet::List() const {
  std::vector<int> out;
  for (int c = 0; c < 64; ++c) {
    if (Has(c)) out.push_back(c);
  }
  return out;
}

std::string CapabilitySet::ToString() const {
  std::string out;
  for (int c : List()) absl::StrAppend(&out, out.empty() ? "" : ",", CapabilityName(c));
  return out.empty() ? "none" : out;
}

std::string CapabilityName(int capability) {
  if (capability >= 0 && static_cast<size_t>(capability) < kNames.size()) {
    return absl::StrCat("cap_", kNames[capability]);
  }
  return absl::StrCat("cap_", capability);
}

int LastCapability() {
  std::ifstream in("/proc/sys/kernel/cap_last_cap");
  int last = 0;
  if (in >> last) return last;
  return CAP_LAST_CAP;
}

ThreadCapabilities CurrentThreadCapabilities() {
  CapData data{};
  if (CapGet(data) != 0) return {};
  return {CapabilitySet(Join(data[0].effective, data[1].effective)),
          CapabilitySet(Join(data[0].permitted, data[1].permitted))};
}

absl::Status SetThisThreadEffective(CapabilitySet effective) {
  CapData data{};
  if (CapGet(data) != 0) return absl::ErrnoToStatus(errno, "capget");
  const uint64_t next = Join(data[0].permitted, data[1].permitted) & effective.bits();
  for (size_t i = 0; i < data.size(); ++i)
    data[i].effective = static_cast<uint32_t>(next >> (32 * i));
  if (CapSet(data) != 0) return absl::ErrnoToStatus(errno, "capset");
  return absl::OkStatus();
}

absl::Status LimitThisThread(CapabilitySet keep) {
  if (int err = LimitCallingThread(keep.bits()); err != 0) {
    return absl::ErrnoToStatus(err, "limiting this thread's capabilities");
  }
  return absl::OkStatus();
}

absl::Status LimitEveryThread(CapabilitySet keep) {
  if (absl::Status s = LimitThisThread(keep); !s.ok()) return s;
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  const int signal_number = SIGRTMIN;
  g_keep.store(keep.bits());
  g_acknowledged.store(0);
  g_failed.store(0);
  struct sigaction action {};
  struct sigaction previous {};
  action.sa_handler = LimitOnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(signal_number, &action, &previous) != 0) {
    return absl::ErrnoToStatus(errno, "sigaction");
  }
  // A thread created meanwhile by a thread not yet limited starts with its creator's set: look
  // again until a pass finds no thread left to signal.
  std::set<pid_t> signalled;
  int sent = 0;
  bool all_answered = true;
  for (int pass = 0; pass < 5; ++pass) {
    int sent_now = 0;
    for (pid_t tid : ThreadIds()) {
      if (tid == self || signalled.contains(tid)) continue;
      std::optional<CapabilitySet> permitted = ThreadPermitted(tid);
      if (!permitted || (*permitted - keep).empty()) continue;  // gone, or within `keep`
      if (syscall(SYS_tgkill, getpid(), tid, signal_number) == 0) {
        signalled.insert(tid);
        ++sent_now;
      }
    }
    if (sent_now == 0) break;
    sent += sent_now;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (g_acknowledged.load() < sent && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    all_answered = g_acknowledged.load() >= sent;
    if (!all_answered) break;
  }
  // A signal still pending when its default action (exit) is back would end the process.
  if (all_answered) sigaction(signal_number, &previous, nullptr);

  std::string left;
  for (pid_t tid : ThreadIds()) {
    std::optional<CapabilitySet> permitted = ThreadPermitted(tid);
    if (permitted && !(*permitted - keep).empty()) {
      absl::StrAppend(&left, left.empty() ? "" : ", ", tid, " (", ThreadName(tid), ": ",
                      (*permitted - keep).ToString(), ")");
    }
  }
  if (!left.empty()) {
    return absl::InternalError(absl::StrCat("threads that kept more capabilities: ", left));
  }
  return absl::OkStatus();
}

}  // namespace kpath
