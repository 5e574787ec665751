#include "probes/kernel/cpu_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/text.h"

namespace kpath {
namespace {

// Debian's abseil has its own absl::string_view, distinct from std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  // NR_CPUS is at most 8192 on every architecture today; the bound keeps "0-4000000000" cheap.
  constexpr int kMaxCpu = 1 << 16;
  std::vector<int> cpus;
  std::string_view list = text::Trim(text);
  if (list.empty()) return cpus;  // The kernel writes an empty line for an empty mask.
  for (std::string_view item : text::Split(list, ',')) {
    std::string_view first = item, last = item;
    if (size_t dash = item.find('-'); dash != std::string_view::npos) {
      first = item.substr(0, dash);
      last = item.substr(dash + 1);
    }
    int lo = 0, hi = 0;
    // SimpleAtoi accepts surrounding whitespace and signs; the kernel never writes them.
    auto is_number = [](std::string_view s) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
    };
    if (!is_number(first) || !is_number(last) || !text::ParseDecimal(first, &lo) ||
        !text::ParseDecimal(last, &hi)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu list \"", Av(list.substr(0, 80)), "\": bad item \"", Av(item), "\""));
    }
    if (lo > hi || hi >= kMaxCpu) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu list \"", Av(list.substr(0, 80)), "\": bad range \"", Av(item), "\""));
    }
    for (int cpu = lo; cpu <= hi; ++cpu) cpus.push_back(cpu);
    if (cpus.size() > static_cast<size_t>(kMaxCpu)) {
      return absl::InvalidArgumentError("cpu list: more CPUs than any kernel supports");
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

absl::StatusOr<std::vector<int>> ReadCpuList(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 16);
  if (!text.ok()) return text.status();
  return ParseCpuList(*text);
}

}  // namespace kpath
