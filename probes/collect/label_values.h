// Label values from kernel data. The kernel's strings (task comm, cgroup names, symbol names)
// are bytes, not text: the exposition format needs UTF-8, and one bad byte makes the whole scrape
// invalid for Prometheus.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kpath {

// Valid UTF-8 is kept; every byte of an invalid sequence and every control character becomes
// '?'. FamilyBuilder applies it to every label value.
std::string SanitizeLabelValue(std::string_view value);

// A task comm (a fixed char[16], NUL-terminated unless full) as a label value.
std::string CommLabel(const char* comm, size_t size);

}  // namespace kpath
