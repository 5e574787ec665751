#include "probes/procfs/meminfo.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "probes/kernel/text.h"

namespace kpath {

const MeminfoField* Meminfo::Find(std::string_view name) const {
  for (const MeminfoField& f : fields_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::optional<uint64_t> Meminfo::Bytes(std::string_view name) const {
  const MeminfoField* f = Find(name);
  if (f == nullptr || f->unit != MeminfoUnit::kBytes) return std::nullopt;
  return f->value;
}

std::optional<uint64_t> Meminfo::Count(std::string_view name) const {
  const MeminfoField* f = Find(name);
  if (f == nullptr || f->unit != MeminfoUnit::kCount) return std::nullopt;
  return f->value;
}

namespace {

constexpr uint64_t kKiB = 1024;
// Error messages quote the offending line; a garbled file may hold one huge or binary line.
constexpr size_t kMaxQuotedBytes = 96;

using text::IsBlank;
using text::SkipBlanks;

// Field names become label values: printable ASCII only, which every kernel's names are.
bool IsValidName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

absl::Status LineError(size_t line_number, std::string_view line, const char* reason) {
  // Debian's abseil has its own string_view type, not std::string_view.
  const size_t quoted_size = std::min(line.size(), kMaxQuotedBytes);
  std::string quoted = absl::CHexEscape(absl::string_view(line.data(), quoted_size));
  if (line.size() > kMaxQuotedBytes) absl::StrAppend(&quoted, "...");
  return absl::InvalidArgumentError(
      absl::StrCat("line ", line_number, " \"", quoted, "\": ", reason));
}

absl::StatusOr<MeminfoField> ParseLine(size_t line_number, std::string_view line) {
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    return LineError(line_number, line, "no ':' after the field name");
  }
  MeminfoField field;
  std::string_view name = line.substr(0, colon);
  if (!IsValidName(name)) return LineError(line_number, line, "bad field name");

  std::string_view rest = SkipBlanks(line.substr(colon + 1));
  if (rest.empty()) return LineError(line_number, line, "no value");
  if (rest.front() == '-') return LineError(line_number, line, "negative value");

  uint64_t value = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return LineError(line_number, line, "value does not fit in 64 bits");
  }
  size_t digits = static_cast<size_t>(end - rest.data());
  // "12x kB" parses 12 and stops at 'x': the value is not a number either.
  if (ec != std::errc() || (digits < rest.size() && !IsBlank(rest[digits]))) {
    return LineError(line_number, line, "value is not a number");
  }
  rest = SkipBlanks(rest.substr(digits));

  size_t unit_end = 0;
  while (unit_end < rest.size() && !IsBlank(rest[unit_end])) ++unit_end;
  std::string_view unit = rest.substr(0, unit_end);
  if (!SkipBlanks(rest.substr(unit_end)).empty()) {
    return LineError(line_number, line, "unexpected text after the value");
  }
  if (unit.empty()) {
    field.unit = MeminfoUnit::kCount;
  } else if (unit == "kB") {
    if (value > std::numeric_limits<uint64_t>::max() / kKiB) {
      return LineError(line_number, line, "value in bytes does not fit in 64 bits");
    }
    value *= kKiB;
    field.unit = MeminfoUnit::kBytes;
  } else {
    return LineError(line_number, line, "unknown unit (expected kB or none)");
  }
  field.name = std::string(name);
  field.value = value;
  return field;
}

}  // namespace

absl::StatusOr<Meminfo> ParseMeminfo(std::string_view text) {
  std::vector<MeminfoField> fields;
  std::unordered_set<std::string_view> seen;  // views into `text`
  size_t line_number = 0;
  for (std::string_view line : text::Lines(text)) {
    ++line_number;
    if (SkipBlanks(line).empty()) continue;

    absl::StatusOr<MeminfoField> field = ParseLine(line_number, line);
    if (!field.ok()) return field.status();
    if (!seen.insert(line.substr(0, line.find(':'))).second) {
      // Two series with one label set would make the whole exposition invalid.
      return LineError(line_number, line, "field name repeated");
    }
    fields.push_back(*std::move(field));
  }
  if (fields.empty()) return absl::InvalidArgumentError("no fields: the text is empty or blank");
  return Meminfo(std::move(fields));
}

}  // namespace kpath
