// Numbers for people (STATUS= lines, logs), not for metrics.
#pragma once

#include <string>

namespace kpath {

// 1.8 GiB, 340 KiB, 512 B: binary prefixes, at most one decimal, trailing ".0" dropped.
std::string FormatBytesIEC(double bytes);

}  // namespace kpath
