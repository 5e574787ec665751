// Which probe mechanisms the kernel under test must attach. The QEMU kernel matrix
// (tests/qemu/run.sh) names them for each kernel it boots, in KPATH_EXPECT_MECHANISMS:
//   percpu_alloc=tp_btf,raw_tp,tracepoint,fentry,kprobe;madvise=fentry,kprobe,tracepoint;...
// There a listed mechanism that does not attach fails its test. Without the variable (the
// development host, CI), a mechanism that does not attach is skipped with a warning that quotes
// kpathd's reason (no CONFIG_KPROBES, fentry refused, no such tracepoint).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>

namespace kpath::testing {

// The mechanisms `probe` must attach on this kernel; nullopt when the environment does not say.
inline std::optional<std::set<std::string>> ExpectedMechanisms(const std::string& probe) {
  const char* env = std::getenv("KPATH_EXPECT_MECHANISMS");
  if (env == nullptr || *env == '\0') return std::nullopt;
  std::istringstream entries(env);
  for (std::string entry; std::getline(entries, entry, ';');) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || entry.substr(0, eq) != probe) continue;
    std::set<std::string> mechanisms;
    std::istringstream names(entry.substr(eq + 1));
    for (std::string name; std::getline(names, name, ',');) mechanisms.insert(name);
    return mechanisms;
  }
  return std::set<std::string>{};
}

// True when the environment says this kernel has `mechanism` for `probe`: it must attach.
inline bool MustAttach(const std::string& probe, const std::string& mechanism) {
  std::optional<std::set<std::string>> expected = ExpectedMechanisms(probe);
  return expected && expected->count(mechanism) > 0;
}

// Whether the kernel exposes its BTF (/sys/kernel/btf/vmlinux). scripts/test.sh also runs the
// integration tests with it hidden (a tmpfs over /sys/kernel/btf in a mount namespace of their
// own), as on kernels built without BTF: tp_btf and fentry are then not expected, and tests of
// BTF itself skip.
inline bool HostHasVmlinuxBtf() { return std::filesystem::exists("/sys/kernel/btf/vmlinux"); }

// The line of kpathd's log that says why `probe` did not attach ("" if none).
inline std::string NotAttachedReason(const std::string& log, const std::string& probe) {
  size_t at = log.find("probe " + probe + ": not attached");
  if (at == std::string::npos) return "";
  return log.substr(at, log.find('\n', at) - at);
}

}  // namespace kpath::testing
