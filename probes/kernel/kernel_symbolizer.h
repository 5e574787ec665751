// Kernel addresses to function names through /proc/kallsyms, for every probe that names kernel
// code (percpu's callers, irqoff's stacks). One policy: vmlinux text never changes, so its part
// is read once (the process's one index, SharedKallsymsIndex); modules and BPF programs (JIT
// images, `bpf_prog_<tag>_<name> [bpf]`) come and go, so the part outside vmlinux is re-read when
// it can have changed: when /proc/modules differs at a Refresh(), and when a lookup reaches past
// vmlinux text, at most once per `module_reread`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/kernel_features.h"

namespace kpath {

// Section boundaries exported as text symbols (_etext, _einittext, __entry_text_end, ...).
bool IsLinkerMarkerSymbol(std::string_view name);

// The name of a JIT-compiled BPF program's symbol, bpf_prog_<16 hex digits>[_<name>] ("" when
// it carries no name); nullopt for every other function, bpf_prog_alloc, bpf_prog_load and the
// other kernel functions whose names merely start with "bpf_prog_" included.
std::optional<std::string_view> BpfProgramName(std::string_view function);

// The index of `paths`' kallsyms, parsed once for the whole process while anyone holds it: the
// kernel-feature cache and the symbolizers share one copy (~2.7 MB for 64k functions) instead of
// parsing one each. `modules`: /proc/modules as the caller read it; another text (a module came
// or went) parses the file anew.
absl::StatusOr<std::shared_ptr<const KallsymsIndex>> SharedKallsymsIndex(
    const HostPaths& paths, const std::string& modules);

// The parts of /proc/kallsyms outside vmlinux, and where vmlinux text lies.
struct KallsymsOutsideVmlinux {
  uint64_t text_begin = 0;  // _stext
  uint64_t text_end = 0;    // _etext
  uint64_t init_begin = 0;  // _sinittext
  uint64_t init_end = 0;    // _einittext
  // Module and BPF function symbols (lines with a [module] tag); null when there are none.
  std::shared_ptr<const KallsymsIndex> modules;
  // Whether a symbol of this exact name was listed (data symbols included): used to ask whether
  // the kernel can resolve a per-CPU variable for a BPF typed ksym.
  std::vector<std::string> listed_names;
};

// Pure: picks the bounds, the module/BPF lines and the `wanted` names out of kallsyms text.
absl::StatusOr<KallsymsOutsideVmlinux> ParseKallsymsOutsideVmlinux(
    std::string_view text, std::span<const std::string_view> wanted = {});

class KernelSymbolizer {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `vmlinux`: the full index when the caller holds it (KernelFeatures::Kallsyms()); null: it is
  // read by the first Refresh() or lookup (SharedKallsymsIndex), once.
  explicit KernelSymbolizer(HostPaths paths, std::shared_ptr<const KallsymsIndex> vmlinux = nullptr,
                            std::chrono::seconds module_reread = std::chrono::seconds(10),
                            Clock clock = std::chrono::steady_clock::now);

  // Reads vmlinux's part the first time, and the module/BPF part the first time and again
  // whenever /proc/modules has changed. Cheap otherwise (one read of /proc/modules). Call it once
  // per collection. An error: kallsyms is unreadable (every name is unknown then).
  absl::Status Refresh();

  // The function containing `address` (no offset, no clone suffix), nullopt where unknown.
  std::optional<std::string> Lookup(uint64_t address);
  // One name per address (innermost first), nullopt where unknown. Never fails: an unreadable
  // kallsyms only leaves more frames unnamed.
  std::vector<std::optional<std::string>> Symbolize(std::span<const uint64_t> addresses);
  // Memoised: "mem_cgroup_css_alloc" for an address inside it; "unknown" when kallsyms is
  // unreadable, its addresses are hidden (kptr_restrict), the address is outside every symbol
  // or past the last function before a linker section marker. The reference lives until the
  // next call.
  const std::string& Name(uint64_t address);

  bool loaded() const { return vmlinux_ != nullptr; }
  // Reads of the module/BPF part so far (the first included): names may differ after one.
  size_t reloads() const { return reloads_; }

 private:
  absl::Status LoadVmlinux();
  absl::Status ReadOutside();
  bool InVmlinuxText(uint64_t address) const;

  HostPaths paths_;
  std::shared_ptr<const KallsymsIndex> vmlinux_;
  bool vmlinux_tried_ = false;
  std::chrono::seconds module_reread_;
  Clock clock_;
  std::optional<KallsymsOutsideVmlinux> outside_;
  std::optional<std::chrono::steady_clock::time_point> outside_read_at_;
  std::optional<std::string> modules_;  // /proc/modules as last seen by Refresh()
  std::unordered_map<uint64_t, std::string> memo_;
  size_t reloads_ = 0;
};

}  // namespace kpath
