#include "probes/kernel/kallsyms.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "probes/kernel/text.h"

namespace kpath {
namespace {

// Debian's abseil has its own absl::string_view, distinct from std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// A compiler clone suffix after "name.": one or more `<kind>.<digits>` pairs, for example
// "isra.0", "constprop.0.isra.0". `.cold` (a split-off fragment, not a function entry) never is.
bool IsCloneSuffix(std::string_view suffix) {
  std::vector<std::string_view> parts = text::Split(suffix, '.');
  if (parts.empty() || parts.size() % 2 != 0) return false;
  for (size_t i = 0; i < parts.size(); i += 2) {
    std::string_view kind = parts[i];
    // `llvm.<n>` is clang's ThinLTO rename of a promoted static function.
    if (kind != "isra" && kind != "constprop" && kind != "part" && kind != "llvm") return false;
    std::string_view digits = parts[i + 1];
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        })) {
      return false;
    }
  }
  return true;
}

bool IsFunctionType(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

}  // namespace

std::optional<KallsymsLine> ParseKallsymsLine(std::string_view line) {
  // "<hex address> <type> <name>[\t[<module>]]"
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 + 3 > line.size() || line[sp1 + 2] != ' ') {
    return std::nullopt;
  }
  std::optional<uint64_t> address = text::ParseHexDigits(line.substr(0, sp1));
  if (!address) return std::nullopt;
  KallsymsLine out{*address, line[sp1 + 1], {}, {}};
  std::string_view rest = line.substr(sp1 + 3);
  size_t name_end = rest.find_first_of(" \t");
  out.name = rest.substr(0, name_end);
  if (name_end != std::string_view::npos) {
    std::string_view tail = text::Trim(rest.substr(name_end));
    if (!tail.empty()) {
      if (tail.size() < 3 || tail.front() != '[' || tail.back() != ']') return std::nullopt;
      out.module = tail.substr(1, tail.size() - 2);
    }
  }
  if (out.name.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(out.type))) {
    return std::nullopt;
  }
  return out;
}

absl::StatusOr<KallsymsIndex> KallsymsIndex::Parse(std::string_view text) {
  KallsymsIndex index;
  bool any_nonzero = false;
  index.by_address_.reserve(text.size() / 40);
  index.names_.reserve(text.size() / 3);
  auto keep_name = [&index](std::string_view name) {
    NameRef ref{static_cast<uint32_t>(index.names_.size()), static_cast<uint32_t>(name.size())};
    index.names_.append(name);
    return ref;
  };
  bool names_too_long = false;
  KallsymsLineCounts counts =
      ForEachKallsymsLine(text, [&](const KallsymsLine& symbol, std::string_view /*line*/) {
        if (names_too_long) return;
        uint64_t address = symbol.address;
        char type = symbol.type;
        std::string_view name = symbol.name;
        if (address != 0) any_nonzero = true;
        // `__pfx_<f>` marks the padding before each function (6.2+, CONFIG_FUNCTION_PADDING):
        // not a function, never a probe target, and half of all symbols on such kernels.
        if (IsFunctionType(type) && !name.starts_with("__pfx_")) {
          index.by_address_.push_back(Symbol{address, keep_name(name)});
        } else if (name.starts_with("__tracepoint_")) {
          index.tracepoint_symbols_.push_back(keep_name(name));
        }
        names_too_long = index.names_.size() > std::numeric_limits<uint32_t>::max();
      });
  if (names_too_long) return absl::InvalidArgumentError("kallsyms: names too long");
  const size_t parsed = counts.parsed, skipped = counts.skipped;
  if (parsed == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kallsyms: none of ", skipped, " lines is '<address> <type> <name>'"));
  }
  index.addresses_hidden_ = !any_nonzero;
  if (index.by_address_.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("kallsyms: too many symbols");
  }
  // The kernel lists vmlinux in address order, then modules: usually sorted already. Stable:
  // among aliases at one address the kernel's order is kept.
  auto by_address = [](const Symbol& a, const Symbol& b) { return a.address < b.address; };
  if (!std::is_sorted(index.by_address_.begin(), index.by_address_.end(), by_address)) {
    std::stable_sort(index.by_address_.begin(), index.by_address_.end(), by_address);
  }
  // The reserves above are guesses from the text's size: give back what the names and symbols
  // did not use (the index lives as long as the daemon).
  index.names_.shrink_to_fit();
  index.by_address_.shrink_to_fit();
  index.tracepoint_symbols_.shrink_to_fit();
  // Sorting (name, index) pairs touches far less memory than sorting indices into Symbols.
  std::vector<std::pair<std::string_view, uint32_t>> names;
  names.reserve(index.by_address_.size());
  for (size_t i = 0; i < index.by_address_.size(); ++i) {
    names.emplace_back(index.Name(index.by_address_[i].name), static_cast<uint32_t>(i));
  }
  std::sort(names.begin(), names.end());
  index.by_name_.reserve(names.size());
  for (const auto& [name, i] : names) index.by_name_.push_back(i);
  std::sort(index.tracepoint_symbols_.begin(), index.tracepoint_symbols_.end(),
            [&index](NameRef a, NameRef b) { return index.Name(a) < index.Name(b); });
  return index;
}

size_t KallsymsIndex::MemoryBytes() const {
  return names_.capacity() + by_address_.capacity() * sizeof(Symbol) +
         by_name_.capacity() * sizeof(uint32_t) + tracepoint_symbols_.capacity() * sizeof(NameRef);
}

std::vector<uint32_t>::const_iterator KallsymsIndex::NameLowerBound(std::string_view name) const {
  return std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [this](uint32_t i, std::string_view n) { return Name(by_address_[i].name) < n; });
}

std::optional<std::string> KallsymsIndex::ResolveFunction(std::string_view name) const {
  if (name.empty()) return std::nullopt;
  if (HasSymbol(name)) return std::string(name);
  // Clones sort right after "name." in the map. Prefer the shortest (fewest transformations),
  // then the alphabetically first, so the answer is stable.
  std::string prefix = absl::StrCat(Av(name), ".");
  std::optional<std::string_view> best;
  for (auto it = NameLowerBound(prefix); it != by_name_.end(); ++it) {
    std::string_view candidate = Name(by_address_[*it].name);
    if (!candidate.starts_with(prefix)) break;
    if (!IsCloneSuffix(candidate.substr(prefix.size()))) continue;
    if (!best || candidate.size() < best->size()) best = candidate;
  }
  if (!best) return std::nullopt;
  return std::string(*best);
}

bool KallsymsIndex::HasSymbol(std::string_view name) const {
  auto it = NameLowerBound(name);
  return it != by_name_.end() && Name(by_address_[*it].name) == name;
}

bool KallsymsIndex::HasTracepoint(std::string_view event) const {
  if (event.empty()) return false;
  std::string symbol = absl::StrCat("__tracepoint_", Av(event));
  auto it = std::lower_bound(tracepoint_symbols_.begin(), tracepoint_symbols_.end(), symbol,
                             [this](NameRef ref, std::string_view n) { return Name(ref) < n; });
  if (it != tracepoint_symbols_.end() && Name(*it) == symbol) return true;
  return HasSymbol(absl::StrCat("__traceiter_", Av(event)));
}

std::optional<std::pair<uint64_t, uint64_t>> KallsymsIndex::FunctionText(
    std::string_view name) const {
  if (addresses_hidden_) return std::nullopt;
  auto it = NameLowerBound(name);
  if (it == by_name_.end() || Name(by_address_[*it].name) != name) return std::nullopt;
  const uint64_t begin = by_address_[*it].address;
  auto next = std::upper_bound(by_address_.begin(), by_address_.end(), begin,
                               [](uint64_t a, const Symbol& s) { return a < s.address; });
  if (next == by_address_.end()) return std::nullopt;
  return std::make_pair(begin, next->address);
}

std::optional<std::string> KallsymsIndex::Symbolize(uint64_t address) const {
  if (addresses_hidden_ || by_address_.empty()) return std::nullopt;
  auto it = std::upper_bound(by_address_.begin(), by_address_.end(), address,
                             [](uint64_t a, const Symbol& s) { return a < s.address; });
  if (it == by_address_.begin()) return std::nullopt;
  --it;
  std::string_view name = Name(it->name);
  // A C identifier has no '.': anything after one is a compiler suffix (.isra.0, .cold, ...).
  name = name.substr(0, name.find('.'));
  return std::string(name);
}

}  // namespace kpath
