#include "probes/hooks/kprobe_list.h"

#include <optional>

#include "fmt/format.h"
#include "probes/kernel/text.h"

namespace kpath {
namespace {

using text::ParseHex;
using text::Tokens;
using text::Trim;

// A token made only of the flag words: "[DISABLED][FTRACE]". Sets the entry's flags.
bool ConsumeFlags(std::string_view token, KprobeListEntry& entry) {
  KprobeListEntry flags;
  while (!token.empty()) {
    if (token.starts_with("[GONE]")) {
      flags.gone = true;
      token.remove_prefix(6);
    } else if (token.starts_with("[DISABLED]")) {
      flags.disabled = true;
      token.remove_prefix(10);
    } else if (token.starts_with("[OPTIMIZED]")) {
      flags.optimized = true;
      token.remove_prefix(11);
    } else if (token.starts_with("[FTRACE]")) {
      flags.ftrace = true;
      token.remove_prefix(8);
    } else {
      return false;
    }
  }
  entry.gone |= flags.gone;
  entry.disabled |= flags.disabled;
  entry.optimized |= flags.optimized;
  entry.ftrace |= flags.ftrace;
  return true;
}

// "vfs_read+0x0", or %pS's "vfs_read+0x0/0x1a0"; a bare address when no symbol is known.
bool ParseSymbol(std::string_view spec, KprobeListEntry& entry) {
  if (spec.empty()) return false;
  size_t plus = spec.rfind('+');
  if (plus == std::string_view::npos) {
    entry.function = std::string(spec);  // an address or a symbol without offset
    return true;
  }
  std::string_view offset = spec.substr(plus + 1);
  offset = offset.substr(0, offset.find('/'));  // %pS appends "/<size>"
  std::optional<uint64_t> value = ParseHex(offset);
  if (plus == 0 || !value) return false;
  entry.function = std::string(spec.substr(0, plus));
  entry.offset = *value;
  return true;
}

std::optional<KprobeListEntry> ParseLine(std::string_view line) {
  std::vector<std::string_view> tokens = Tokens(line);
  if (tokens.size() < 3) return std::nullopt;
  KprobeListEntry entry;
  std::optional<uint64_t> address = ParseHex(tokens[0]);
  if (!address) return std::nullopt;
  entry.address = *address;
  if (tokens[1] == "r") {
    entry.is_return = true;
  } else if (tokens[1] != "k" && tokens[1] != "j") {
    return std::nullopt;
  }
  if (!ParseSymbol(tokens[2], entry)) return std::nullopt;
  for (size_t i = 3; i < tokens.size(); ++i) {
    std::string_view token = tokens[i];
    if (ConsumeFlags(token, entry)) continue;
    if (!entry.module.empty()) return std::nullopt;
    // report_probe() writes the bare module name; %pS writes it in brackets.
    if (token.size() > 2 && token.front() == '[' && token.back() == ']') {
      token = token.substr(1, token.size() - 2);
    }
    entry.module = std::string(token);
  }
  return entry;
}

}  // namespace

absl::StatusOr<KprobeList> ParseKprobeList(std::string_view text) {
  KprobeList list;
  for (std::string_view line : text::Lines(text)) {
    if (Trim(line).empty()) continue;
    if (std::optional<KprobeListEntry> entry = ParseLine(line)) {
      list.entries.push_back(*std::move(entry));
    } else {
      ++list.unparsed_lines;
    }
  }
  if (list.entries.empty() && list.unparsed_lines > 0) {
    return absl::InvalidArgumentError(
        fmt::format("kprobes/list: none of {} lines is '<address>  <k|r>  <symbol>+<offset>'",
                    list.unparsed_lines));
  }
  return list;
}

absl::StatusOr<bool> ParseKprobesEnabled(std::string_view text) {
  std::string_view value = Trim(text);
  if (value == "1") return true;
  if (value == "0") return false;
  return absl::InvalidArgumentError(
      fmt::format("kprobes/enabled: expected 0 or 1, got \"{}\"", value.substr(0, 40)));
}

}  // namespace kpath
