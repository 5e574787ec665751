#include "probes/kernel/systemd_unit.h"

#include <array>
#include <cstddef>

namespace kpath {

namespace {

// Unit types that get a cgroup of their own (the others never run processes).
constexpr std::array<std::string_view, 6> kUnitSuffixes = {".service", ".scope", ".slice",
                                                           ".socket",  ".mount", ".swap"};
// Separators across which adjacent "*"s merge.
constexpr std::string_view kMergeSeparators = "-_.:";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsTokenChar(char c) { return IsDigit(c) || IsLetter(c); }

bool AllOf(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s)
    if (!pred(c)) return false;
  return true;
}
bool HasDigit(std::string_view s) {
  for (char c : s)
    if (IsDigit(c)) return true;
  return false;
}
// An identifier-like run: 8+ hex digits with at least one decimal digit (words such as
// "deadbeef" or "facade" stay).
bool IsHexId(std::string_view s) { return s.size() >= 8 && AllOf(s, IsHex) && HasDigit(s); }

// The suffix when `name` is "<something><unit suffix>", else empty.
std::string_view UnitSuffix(std::string_view name) {
  for (std::string_view suffix : kUnitSuffixes) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) return suffix;
  }
  return {};
}

// user-1000, user@1000, user-runtime-dir@1000: kept, the uid is bounded by the host's users.
bool IsPerUserStem(std::string_view stem) {
  for (std::string_view prefix : {"user-runtime-dir@", "user@", "user-"}) {
    if (stem.starts_with(prefix) && AllOf(stem.substr(prefix.size()), IsDigit)) return true;
  }
  return false;
}

// Length of a UUID (8-4-4-4-12 hex digits, "-" or "_" between groups) starting at s[i], or 0.
size_t UuidLengthAt(std::string_view s, size_t i) {
  constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t p = i;
  for (size_t g = 0; g < std::size(kGroups); ++g) {
    if (g > 0) {
      if (p >= s.size() || (s[p] != '-' && s[p] != '_')) return 0;
      ++p;
    }
    for (size_t k = 0; k < kGroups[g]; ++k, ++p) {
      if (p >= s.size() || !IsHex(s[p])) return 0;
    }
  }
  if (p < s.size() && IsHex(s[p])) return 0;  // a longer hex run is not a UUID
  return p - i;
}

// Appends "*", merging it into a "*" that precedes it across separators only.
void AppendStar(std::string& out) {
  size_t j = out.size();
  while (j > 0 && kMergeSeparators.find(out[j - 1]) != std::string_view::npos) --j;
  if (j > 0 && out[j - 1] == '*') {
    out.resize(j);
    return;
  }
  out += '*';
}

// One token (a run of letters and digits); `prev` is the character before it ('\0' at the start).
void AppendFoldedToken(std::string& out, std::string_view token, char prev, bool first) {
  if (token.size() >= 16 && IsHexId(token)) {  // container ids, also as a whole name
    AppendStar(out);
    return;
  }
  if (first) {  // a name's first word: x11-common, e2scrub@...
    out += token;
    return;
  }
  if (AllOf(token, IsDigit)) {
    // A version number after a kept word (php8.2-fpm) stays; 10.0.0.1 after a "*" does not.
    if (prev == '.' && !(out.size() >= 2 && out[out.size() - 2] == '*')) {
      out += token;
    } else {
      AppendStar(out);
    }
    return;
  }
  size_t letters = 0;
  while (letters < token.size() && IsLetter(token[letters])) ++letters;
  if (letters == 1 && AllOf(token.substr(1), IsDigit)) {  // u123, c3, p1234, i5
    AppendStar(out);
    return;
  }
  // Letters then an id: the longest word that leaves 8+ hex digits (pod<hex> -> pod*).
  for (size_t k = letters; k >= 1; --k) {
    if (IsHexId(token.substr(k))) {
      if (k > 1) out += token.substr(0, k);
      AppendStar(out);
      return;
    }
  }
  out += token;
}

std::string FoldStem(std::string_view stem) {
  if (IsPerUserStem(stem)) return std::string(stem);
  std::string out;
  out.reserve(stem.size());
  bool first = true;
  size_t i = 0;
  while (i < stem.size()) {
    // A UUID may start inside a token ("pod<uuid>"), so look for one at every position.
    if (size_t n = UuidLengthAt(stem, i); n > 0) {
      AppendStar(out);
      i += n;
      first = false;
      continue;
    }
    if (!IsTokenChar(stem[i])) {
      out += stem[i++];
      continue;
    }
    size_t end = i;
    while (end < stem.size() && IsTokenChar(stem[end])) ++end;
    // A UUID that starts inside this token ends it there.
    for (size_t j = i + 1; j < end; ++j) {
      if (UuidLengthAt(stem, j) > 0) {
        end = j;
        break;
      }
    }
    AppendFoldedToken(out, stem.substr(i, end - i), i > 0 ? stem[i - 1] : '\0', first);
    first = false;
    i = end;
  }
  return out;
}

}  // namespace

std::string FoldTransientUnitName(std::string_view unit) {
  std::string_view suffix = UnitSuffix(unit);
  std::string_view stem = unit.substr(0, unit.size() - suffix.size());
  std::string out = FoldStem(stem);
  out += suffix;
  return out;
}

std::string SystemdUnitOfCgroupPath(std::string_view path) {
  size_t end = path.size();
  while (end > 0) {
    size_t slash = path.rfind('/', end - 1);
    size_t begin = slash == std::string_view::npos ? 0 : slash + 1;
    std::string_view component = path.substr(begin, end - begin);
    if (!UnitSuffix(component).empty()) return FoldTransientUnitName(component);
    if (slash == std::string_view::npos) break;
    end = slash;
  }
  return std::string(kNoUnit);
}

std::string SystemdUnitOfPathTail(std::string_view tail, bool truncated) {
  if (truncated) {
    size_t slash = tail.find('/');
    if (slash == std::string_view::npos) return std::string(kNoUnit);
    tail.remove_prefix(slash);
  }
  return SystemdUnitOfCgroupPath(tail);
}

}  // namespace kpath
