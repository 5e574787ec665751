#include "probes/collect/label_values.h"

#include <cstring>

namespace kpath {

namespace {
// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  }
  // Reject overlong forms, surrogates and code points past U+10FFFF.
  if (len == 2 && c < 0xc2) return 0;
  if (len == 3) {
    unsigned char c1 = byte(i + 1);
    if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0)) return 0;
  }
  if (len == 4) {
    unsigned char c1 = byte(i + 1);
    if ((c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90) || c > 0xf4) return 0;
  }
  return len;
}
}  // namespace

std::string SanitizeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size();) {
    size_t len = Utf8SequenceLength(value, i);
    if (len == 0) {
      out += '?';
      ++i;
    } else if (len == 1 && (static_cast<unsigned char>(value[i]) < 0x20 || value[i] == 0x7f)) {
      out += '?';
      ++i;
    } else {
      out.append(value, i, len);
      i += len;
    }
  }
  return out;
}

std::string CommLabel(const char* comm, size_t size) {
  return SanitizeLabelValue(std::string_view(comm, strnlen(comm, size)));
}

}  // namespace kpath
