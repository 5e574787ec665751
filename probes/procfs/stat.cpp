#include "probes/procfs/stat.h"

#include <charconv>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "probes/kernel/text.h"

namespace kpath {

namespace {

constexpr size_t kMaxQuotedBytes = 96;
// user, nice, system, idle: present on every kernel kpathd can meet.
constexpr size_t kMinCpuModes = 4;

using text::NextToken;

std::string Quote(std::string_view line) {
  std::string quoted;
  for (char c : line.substr(0, kMaxQuotedBytes)) quoted += (c >= ' ' && c <= '~') ? c : '?';
  if (line.size() > kMaxQuotedBytes) quoted += "...";
  return quoted;
}

absl::Status LineError(size_t line_number, std::string_view line, std::string_view reason) {
  return absl::InvalidArgumentError(
      fmt::format("/proc/stat line {} \"{}\": {}", line_number, Quote(line), reason));
}

// Plain decimal digits, no sign, within 64 bits.
bool ParseCount(std::string_view token, uint64_t& out) {
  if (token.empty() || token.front() < '0' || token.front() > '9') return false;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), out);
  return ec == std::errc() && end == token.data() + token.size();
}

bool IsCpuName(std::string_view name) {
  if (!name.starts_with("cpu")) return false;
  for (char c : name.substr(3)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<ProcStat> ParseProcStat(std::string_view text) {
  ProcStat stat;
  bool have_total = false;
  std::set<std::string, std::less<>> seen_cpus;
  size_t line_number = 0;
  for (std::string_view line : text::Lines(text)) {
    ++line_number;
    std::string_view rest = line;
    std::string_view key = NextToken(rest);
    if (key.empty()) continue;

    if (IsCpuName(key)) {
      CpuTimes times;
      times.cpu = std::string(key);
      for (std::string_view token = NextToken(rest); !token.empty(); token = NextToken(rest)) {
        uint64_t value = 0;
        if (!ParseCount(token, value)) {
          return LineError(line_number, line, "CPU time is not a number (or beyond 64 bits)");
        }
        // Columns beyond the known modes (a future kernel's) are ignored.
        if (times.modes < times.ticks.size()) times.ticks[times.modes++] = value;
      }
      if (times.modes < kMinCpuModes) {
        return LineError(line_number, line, "fewer than 4 CPU time columns");
      }
      if (!seen_cpus.insert(times.cpu).second) {
        return LineError(line_number, line, "cpu line repeated");
      }
      if (key == "cpu") {
        stat.total = std::move(times);
        have_total = true;
      } else {
        stat.per_cpu.push_back(std::move(times));
      }
      continue;
    }

    std::optional<uint64_t>* scalar = nullptr;
    if (key == "ctxt") {
      scalar = &stat.context_switches;
    } else if (key == "btime") {
      scalar = &stat.boot_time;
    } else if (key == "processes") {
      scalar = &stat.forks;
    } else if (key == "procs_running") {
      scalar = &stat.procs_running;
    } else if (key == "procs_blocked") {
      scalar = &stat.procs_blocked;
    }
    if (scalar == nullptr) continue;  // intr, softirq, page, swap, ...: not used
    uint64_t value = 0;
    if (!ParseCount(NextToken(rest), value)) {
      return LineError(line_number, line, "value is not a number (or beyond 64 bits)");
    }
    *scalar = value;
  }
  if (!have_total) return absl::InvalidArgumentError("/proc/stat: no aggregate \"cpu\" line");
  return stat;
}

}  // namespace kpath
