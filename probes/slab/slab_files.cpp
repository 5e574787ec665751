#include "probes/slab/slab_files.h"

#include <array>
#include <limits>

#include "fmt/format.h"
#include "probes/kernel/text.h"

namespace kpath {

namespace {

using text::Tokens;

bool ParseUnsigned(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  out = value;
  return true;
}

std::string Quote(std::string_view line) {
  std::string q(line.substr(0, 80));
  for (char& c : q) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return fmt::format("\"{}{}\"", q, line.size() > 80 ? "..." : "");
}

}  // namespace

absl::StatusOr<uint64_t> ParseSlabAttribute(std::string_view text) {
  std::string_view line = text::FirstLine(text);
  std::vector<std::string_view> fields = Tokens(line);
  uint64_t value = 0;
  if (fields.empty() || !ParseUnsigned(fields[0], value)) {
    return absl::InvalidArgumentError(
        fmt::format("slab attribute: expected a number first, got {}", Quote(line)));
  }
  return value;
}

absl::StatusOr<std::vector<SlabinfoEntry>> ParseSlabinfo(std::string_view text) {
  std::vector<SlabinfoEntry> entries;
  size_t line_no = 0;
  bool have_version = false;
  for (std::string_view line : text::Lines(text)) {
    ++line_no;
    auto error = [&](std::string_view what) {
      return absl::InvalidArgumentError(
          fmt::format("slabinfo line {}: {} in {}", line_no, what, Quote(line)));
    };
    std::vector<std::string_view> f = Tokens(line);
    if (f.empty()) continue;
    if (!have_version) {
      // "slabinfo - version: 2.1": 2.x is the layout below (since Linux 2.6.10).
      if (f.size() != 4 || f[0] != "slabinfo" || f[2] != "version:" || !f[3].starts_with("2.")) {
        return error("expected \"slabinfo - version: 2.x\"");
      }
      have_version = true;
      continue;
    }
    if (f[0].starts_with("#")) continue;
    // name 5 numbers : tunables 3 numbers : slabdata 3 numbers
    if (f.size() != 16 || f[6] != ":" || f[7] != "tunables" || f[11] != ":" ||
        f[12] != "slabdata") {
      return error("expected \"<name> 5 numbers : tunables 3 numbers : slabdata 3 numbers\"");
    }
    SlabinfoEntry e;
    e.name = std::string(f[0]);
    std::array<uint64_t*, 5> head = {&e.active_objects, &e.objects, &e.object_size,
                                     &e.objects_per_slab, &e.pages_per_slab};
    for (size_t i = 0; i < head.size(); ++i) {
      if (!ParseUnsigned(f[1 + i], *head[i])) return error("a count is not a number");
    }
    uint64_t ignored = 0;
    for (size_t i = 8; i <= 10; ++i) {
      if (!ParseUnsigned(f[i], ignored)) return error("a tunable is not a number");
    }
    if (!ParseUnsigned(f[13], e.active_slabs) || !ParseUnsigned(f[14], e.slabs) ||
        !ParseUnsigned(f[15], ignored)) {
      return error("a slab count is not a number");
    }
    entries.push_back(std::move(e));
  }
  if (!have_version) return absl::InvalidArgumentError("slabinfo: empty");
  return entries;
}

}  // namespace kpath
