// /proc/kallsyms, parsed into a compact index: function lookup by name (with compiler clones),
// tracepoint symbols, and address -> function for symbolization.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "probes/kernel/text.h"

namespace kpath {

// One line of /proc/kallsyms: "<hex address> <type> <name>[\t[<module>]]".
struct KallsymsLine {
  uint64_t address = 0;
  char type = 0;            // 't', 'T', 'd', ...
  std::string_view name;    // "pcpu_alloc_noprof", suffixes kept
  std::string_view module;  // "ext4"; empty for vmlinux (and BPF's "[bpf]" gives "bpf")
};
// nullopt for any other line (the caller counts or skips it).
std::optional<KallsymsLine> ParseKallsymsLine(std::string_view line);

// The one loop over kallsyms text: `on_symbol(const KallsymsLine&, std::string_view line)` for
// every symbol line, in the file's order. Empty lines are neither parsed nor skipped.
struct KallsymsLineCounts {
  size_t parsed = 0;
  size_t skipped = 0;
};
template <typename OnSymbol>
KallsymsLineCounts ForEachKallsymsLine(std::string_view text, OnSymbol&& on_symbol) {
  KallsymsLineCounts counts;
  for (std::string_view line : text::Lines(text)) {
    if (line.empty()) continue;
    std::optional<KallsymsLine> symbol = ParseKallsymsLine(line);
    if (!symbol) {
      ++counts.skipped;
      continue;
    }
    ++counts.parsed;
    on_symbol(*symbol, line);
  }
  return counts;
}

// /proc/kallsyms, parsed. Function symbols only (types t, T, w, W), sorted by address.
// Compact: 20 bytes per function plus its name once in one blob (2.7 MB for 64k functions;
// per-symbol std::strings took ~7 MB), since one index lives as long as the daemon.
class KallsymsIndex {
 public:
  static absl::StatusOr<KallsymsIndex> Parse(std::string_view text);

  // The symbol the kernel really has for a function name: the exact name, else a compiler clone
  // of it (`name.isra.0`, `name.constprop.0`, `name.part.0`), never a `.cold` fragment.
  std::optional<std::string> ResolveFunction(std::string_view name) const;
  // A function symbol of exactly that name.
  bool HasSymbol(std::string_view name) const;
  // The kernel defines this tracepoint: a `__tracepoint_<event>` data symbol (listed only with
  // CONFIG_KALLSYMS_ALL) or a `__traceiter_<event>` function (5.10+).
  bool HasTracepoint(std::string_view event) const;
  // The function containing `address`, without offset or clone suffix ("mem_cgroup_css_alloc");
  // a module function gets no module prefix. nullopt if below the first symbol.
  std::optional<std::string> Symbolize(uint64_t address) const;
  // The text of the function of exactly that name: [its address, the next function's address).
  // nullopt when there is none, it is the last function, or addresses are hidden.
  std::optional<std::pair<uint64_t, uint64_t>> FunctionText(std::string_view name) const;
  // True when every address is 0 (kptr_restrict hides them from this reader).
  bool AddressesHidden() const { return addresses_hidden_; }
  size_t size() const { return by_address_.size(); }
  // Heap bytes the index holds (its vectors' capacities and the name blob).
  size_t MemoryBytes() const;

 private:
  // A name in names_: no terminator, no copy of its own. The module of a module symbol is not
  // kept: no lookup uses it.
  struct NameRef {
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  struct Symbol {
    uint64_t address = 0;
    NameRef name;  // "pcpu_alloc_noprof", suffixes kept as the kernel has them
  };
  std::string_view Name(NameRef ref) const {
    return std::string_view(names_).substr(ref.offset, ref.size);
  }
  // Index of the first by_name_ entry whose name is >= `name`.
  std::vector<uint32_t>::const_iterator NameLowerBound(std::string_view name) const;

  std::string names_;               // every kept name, back to back
  std::vector<Symbol> by_address_;  // without `__pfx_*` padding markers (not functions)
  // Indices into by_address_, sorted by name (then address).
  std::vector<uint32_t> by_name_;
  // `__tracepoint_*` data symbols, sorted by name: the only non-function symbols kept.
  std::vector<NameRef> tracepoint_symbols_;
  bool addresses_hidden_ = false;
};

}  // namespace kpath
