// Linux capabilities of kpathd's threads, through the capget/capset system calls themselves
// (libcap is not a dependency). Capabilities belong to each thread, not to the process: a thread
// changes only its own, and a new thread starts with its creator's. LimitEveryThread makes each
// of the process's threads limit itself, as libcap's psx does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace kpath {

// A set of capabilities (bit N = capability N, as in /proc/PID/status).
class CapabilitySet {
 public:
  constexpr CapabilitySet() = default;
  constexpr explicit CapabilitySet(uint64_t bits) : bits_(bits) {}
  static CapabilitySet Of(std::initializer_list<int> capabilities);

  bool Has(int capability) const {
    return capability >= 0 && capability < 64 && (bits_ >> capability) & 1;
  }
  CapabilitySet With(int capability) const {
    return CapabilitySet(bits_ | (uint64_t{1} << capability));
  }
  CapabilitySet Without(int capability) const {
    return CapabilitySet(bits_ & ~(uint64_t{1} << capability));
  }
  CapabilitySet operator&(CapabilitySet o) const { return CapabilitySet(bits_ & o.bits_); }
  CapabilitySet operator-(CapabilitySet o) const { return CapabilitySet(bits_ & ~o.bits_); }
  bool empty() const { return bits_ == 0; }
  uint64_t bits() const { return bits_; }
  bool operator==(const CapabilitySet&) const = default;

  // The capabilities, lowest first.
  std::vector<int> List() const;
  // "cap_bpf,cap_perfmon" (lower case, as capsh and systemd write them); "none" when empty.
  std::string ToString() const;

 private:
  uint64_t bits_ = 0;
};

// "cap_sys_admin"; "cap_N" for a number this table does not know.
std::string CapabilityName(int capability);

// The highest capability number the running kernel knows (/proc/sys/kernel/cap_last_cap):
// CAP_BPF (39) and CAP_PERFMON (38) exist from Linux 5.8.
int LastCapability();

struct ThreadCapabilities {
  CapabilitySet effective;
  CapabilitySet permitted;
};
ThreadCapabilities CurrentThreadCapabilities();

// Sets the calling thread's effective set (within its permitted set, which stays).
absl::Status SetThisThreadEffective(CapabilitySet effective);

// Limits the calling thread to `keep`: effective = permitted = keep & permitted, no inheritable
// or ambient capabilities, and no_new_privs (an execve could not give any back).
absl::Status LimitThisThread(CapabilitySet keep);

// Limits every thread of the process to `keep` as LimitThisThread does: the caller directly, the
// others through a signal whose handler limits the thread it runs on. Threads already within
// `keep` are not disturbed. Returns an error naming the threads left with more.
absl::Status LimitEveryThread(CapabilitySet keep);

// Runs `work` on a new thread limited to `keep` (LimitThisThread) and returns its result: the
// threads `work` starts begin with no more than `keep` (civetweb's, for instance).
template <typename Work>
auto RunOnThreadLimitedTo(CapabilitySet keep, Work work) -> decltype(work()) {
  std::optional<decltype(work())> result;
  std::thread thread([&] {
    (void)LimitThisThread(keep);  // cannot fail but by having less, which is fine
    result.emplace(work());
  });
  thread.join();
  return *std::move(result);
}

}  // namespace kpath
