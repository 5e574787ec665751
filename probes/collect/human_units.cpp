#include "probes/collect/human_units.h"

#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kpath {

std::string FormatBytesIEC(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr size_t kLast = std::size(kUnits) - 1;
  if (!std::isfinite(bytes)) return absl::StrCat(bytes, " B");

  const bool negative = bytes < 0;
  double magnitude = std::fabs(bytes);
  size_t unit = 0;
  while (unit < kLast && magnitude >= 1024) {
    magnitude /= 1024;
    ++unit;
  }
  // Beyond ~1e15 EiB llround would overflow; nothing real gets there.
  if (magnitude >= 1e15)
    return absl::StrFormat("%s%.0f %s", negative ? "-" : "", magnitude, kUnits[unit]);
  long long tenths = std::llround(magnitude * 10);
  if (tenths >= 10240 && unit < kLast) {  // 1023.96 KiB rounds to 1 MiB, not "1024 KiB"
    magnitude /= 1024;
    ++unit;
    tenths = std::llround(magnitude * 10);
  }
  std::string out = absl::StrCat(negative && tenths != 0 ? "-" : "", tenths / 10);
  if (tenths % 10 != 0) absl::StrAppend(&out, ".", tenths % 10);
  absl::StrAppend(&out, " ", kUnits[unit]);
  return out;
}

}  // namespace kpath
