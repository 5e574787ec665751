// Small, allocation-free helpers for the line formats of /proc, /sys, debugfs and tracefs files:
// every parser in probes/ splits its text with these. Numbers are parsed strictly (no sign, no
// spaces, bounded length).
#pragma once

#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

namespace kpath::text {

inline bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

inline std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

inline std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

inline std::string_view Trim(std::string_view s) { return TrimRight(TrimLeft(s)); }

// The lines of a text, without their '\n' (and a trailing '\r'); a final line without '\n' is
// kept, an empty text has none. Lazy: `for (std::string_view line : Lines(text))` allocates
// nothing, so it serves /proc/kallsyms' 200k lines as well as a one-line sysfs file.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::string_view*;
    using reference = std::string_view;

    iterator() = default;
    explicit iterator(std::string_view rest) : rest_(rest), at_end_(rest.empty()) { Next(); }
    std::string_view operator*() const { return line_; }
    iterator& operator++() {
      Next();
      return *this;
    }
    bool operator==(const iterator& other) const { return done_ == other.done_; }

   private:
    void Next() {
      if (at_end_) {
        done_ = true;
        return;
      }
      done_ = false;
      size_t eol = rest_.find('\n');
      line_ = rest_.substr(0, eol);
      if (!line_.empty() && line_.back() == '\r') line_.remove_suffix(1);
      if (eol == std::string_view::npos || eol + 1 == rest_.size()) {
        at_end_ = true;
      } else {
        rest_.remove_prefix(eol + 1);
      }
    }
    std::string_view rest_;
    std::string_view line_;
    bool at_end_ = true;
    bool done_ = true;
  };

  iterator begin() const { return text_.empty() ? iterator() : iterator(text_); }
  iterator end() const { return iterator(); }

 private:
  std::string_view text_;
};

// Blank: a space or a tab, the separators of /proc's columns.
inline bool IsBlank(char c) { return c == ' ' || c == '\t'; }

inline std::string_view SkipBlanks(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && IsBlank(s[i])) ++i;
  return s.substr(i);
}

// The next blank-separated token; `s` is left after it. Empty at the end of `s`.
inline std::string_view NextToken(std::string_view& s) {
  s = SkipBlanks(s);
  size_t end = 0;
  while (end < s.size() && !IsBlank(s[end])) ++end;
  std::string_view token = s.substr(0, end);
  s.remove_prefix(end);
  return token;
}

// The first line of a text (a sysfs attribute, a /proc/self/stat line).
inline std::string_view FirstLine(std::string_view text) { return text.substr(0, text.find('\n')); }

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

// The parts between separators ("a,b," -> "a", "b", ""); always at least one.
inline std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

// Hex digits without a prefix, at most 16 of them: a kernel address as /proc/kallsyms prints it.
inline std::optional<uint64_t> ParseHexDigits(std::string_view s) {
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  return value;
}

// Hex digits, with or without a 0x prefix, at most 16 of them.
inline std::optional<uint64_t> ParseHex(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  return ParseHexDigits(s);
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

// Decimal digits only, within T's range.
template <typename T>
bool ParseDecimal(std::string_view s, T* out) {
  std::optional<uint64_t> value = ParseDecimal(s);
  if (!value || *value > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
  *out = static_cast<T>(*value);
  return true;
}

// "0x10" (hex) or "16" (decimal), as offsets are written in kprobe specs.
inline std::optional<uint64_t> ParseOffset(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) return ParseHex(s);
  return ParseDecimal(s);
}

}  // namespace kpath::text
