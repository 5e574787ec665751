// Kernel addresses to function names through /proc/kallsyms, kept current: the index is re-read
// when /proc/modules changes (a module brings or takes its symbols), and answers are memoised so
// a probe symbolises each distinct call site once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

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
// kernel-feature cache and the percpu probe's symbolizer share one copy (~2.7 MB for 64k
// functions) instead of parsing one each. `modules`: /proc/modules as the caller read it; another
// text (a module came or went) parses the file anew.
absl::StatusOr<std::shared_ptr<const KallsymsIndex>> SharedKallsymsIndex(
    const HostPaths& paths, const std::string& modules);

class KernelSymbolizer {
 public:
  explicit KernelSymbolizer(HostPaths paths) : paths_(std::move(paths)) {}

  // Loads kallsyms the first time and again whenever /proc/modules has changed. Cheap otherwise
  // (one read of /proc/modules). Call it once per collection.
  absl::Status Refresh();

  // "mem_cgroup_css_alloc" for an address inside it; "unknown" when kallsyms is unreadable, its
  // addresses are hidden (kptr_restrict) or the address is outside every symbol.
  const std::string& Symbolize(uint64_t address);

  bool loaded() const { return index_ != nullptr; }
  size_t reloads() const { return reloads_; }

 private:
  HostPaths paths_;
  std::shared_ptr<const KallsymsIndex> index_;
  std::string modules_;  // /proc/modules as last seen
  std::unordered_map<uint64_t, std::string> memo_;
  size_t reloads_ = 0;
};

}  // namespace kpath
