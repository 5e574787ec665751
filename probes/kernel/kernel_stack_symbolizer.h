// Kernel stack addresses to function names for IRQ-off regions. vmlinux text is named from the
// kallsyms index read at start (it never changes); addresses outside it belong to modules or to
// BPF programs (JIT images, `bpf_prog_<tag>_<name> [bpf]`), which come and go, so that part of
// kallsyms is re-read when a stack reaches into it, at most once per `module_refresh`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/kernel_features.h"

namespace kpath {

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

class KernelStackSymbolizer {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `vmlinux`: the full index (may be null: then nothing is named). `paths`: where kallsyms is.
  KernelStackSymbolizer(HostPaths paths, std::shared_ptr<const KallsymsIndex> vmlinux,
                        std::chrono::seconds module_refresh = std::chrono::seconds(10),
                        Clock clock = std::chrono::steady_clock::now);

  // One name per address (innermost first), nullopt where unknown. Never fails: an unreadable
  // kallsyms only leaves more frames unnamed.
  std::vector<std::optional<std::string>> Symbolize(std::span<const uint64_t> addresses);

  size_t module_reloads() const { return module_reloads_; }

 private:
  bool InVmlinuxText(uint64_t address) const;
  void RefreshOutside();

  HostPaths paths_;
  std::shared_ptr<const KallsymsIndex> vmlinux_;
  std::chrono::seconds module_refresh_;
  Clock clock_;
  std::optional<KallsymsOutsideVmlinux> outside_;
  std::optional<std::chrono::steady_clock::time_point> outside_read_at_;
  size_t module_reloads_ = 0;
};

}  // namespace kpath
