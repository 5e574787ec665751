// Small, allocation-free helpers for the line formats of debugfs, tracefs and /proc files that
// the hook parsers read. Numbers are parsed strictly (no sign, no spaces, bounded length).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "probes/kernel/kernel_features.h"

namespace kpath::tracefs_text {

inline bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Lines without their '\n' (and a trailing '\r'); a final line without '\n' is kept.
inline std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
  return lines;
}

// Whitespace-separated tokens.
inline std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsSpace(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !IsSpace(line[i])) ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

// Hex digits, with or without a 0x prefix, at most 16 of them.
inline std::optional<uint64_t> ParseHex(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  uint64_t value = 0;
  if (!kpath::ParseHex(s, value)) return std::nullopt;
  return value;
}

// Decimal digits only, at most 19 of them (fits in uint64_t).
inline std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

// "0x10" (hex) or "16" (decimal), as offsets are written in kprobe specs.
inline std::optional<uint64_t> ParseOffset(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) return ParseHex(s);
  return ParseDecimal(s);
}

}  // namespace kpath::tracefs_text
