// /proc/meminfo as data: every field in file order, kB values converted to bytes. The parser is a
// pure function of the file's text so it runs against fixtures from any kernel (and a fuzzer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kpath {

enum class MeminfoUnit {
  kBytes,  // the line ended in "kB" (which the kernel means as KiB); value is in bytes
  kCount,  // no unit (HugePages_Total, HugePages_Free, ...): a plain count
};

struct MeminfoField {
  std::string name;  // as in the file without the colon: "MemTotal", "Active(anon)"
  uint64_t value = 0;
  MeminfoUnit unit = MeminfoUnit::kBytes;
};

class Meminfo {
 public:
  explicit Meminfo(std::vector<MeminfoField> fields) : fields_(std::move(fields)) {}

  // In file order; names are unique.
  const std::vector<MeminfoField>& fields() const { return fields_; }

  // Linear scans: the file has about 60 fields and is read once per sampling interval.
  const MeminfoField* Find(std::string_view name) const;
  // The field in bytes; nullopt when it is absent or has no kB unit.
  std::optional<uint64_t> Bytes(std::string_view name) const;
  // The unit-less field's count; nullopt when it is absent or is in bytes.
  std::optional<uint64_t> Count(std::string_view name) const;

 private:
  std::vector<MeminfoField> fields_;
};

// Parses the text of /proc/meminfo: lines of `Name:  <unsigned decimal>[ kB]`. Blank lines are
// skipped. InvalidArgument, naming the 1-based line and its text, for a line that does not parse,
// a negative number, a value that overflows 64 bits (after the x1024 for kB), an unknown unit or a
// repeated field name; InvalidArgument too for a text without any field. Never throws.
absl::StatusOr<Meminfo> ParseMeminfo(std::string_view text);

}  // namespace kpath
