#include "probes/procfs/interrupts.h"

#include <charconv>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "probes/kernel/text.h"

namespace kpath {

namespace {

// Error messages quote the offending line; a garbled file may hold one huge or binary line.
constexpr size_t kMaxQuotedBytes = 96;

using text::IsBlank;
using text::NextToken;
using text::SkipBlanks;

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (IsBlank(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string Quote(std::string_view line) {
  std::string quoted;
  for (char c : line.substr(0, kMaxQuotedBytes)) {
    quoted += (c >= ' ' && c <= '~') ? c : '?';
  }
  if (line.size() > kMaxQuotedBytes) quoted += "...";
  return quoted;
}

absl::Status LineError(size_t line_number, std::string_view line, std::string_view reason) {
  return absl::InvalidArgumentError(
      fmt::format("/proc/interrupts line {} \"{}\": {}", line_number, Quote(line), reason));
}

}  // namespace

uint64_t InterruptRow::Total() const {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  return total;
}

const InterruptRow* Interrupts::Find(std::string_view name) const {
  for (const InterruptRow& row : rows_) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

std::optional<uint64_t> Interrupts::TlbShootdowns() const {
  const InterruptRow* tlb = Find("TLB");
  if (tlb == nullptr) return std::nullopt;
  return tlb->Total();
}

absl::StatusOr<Interrupts> ParseInterrupts(std::string_view text) {
  std::vector<std::string> cpus;
  std::vector<InterruptRow> rows;
  std::set<std::string, std::less<>> seen;
  bool have_header = false;
  size_t line_number = 0;
  for (std::string_view line : text::Lines(text)) {
    line = TrimRight(line);
    ++line_number;
    if (SkipBlanks(line).empty()) continue;

    if (!have_header) {
      // "           CPU0       CPU1"
      std::string_view rest = line;
      for (std::string_view token = NextToken(rest); !token.empty(); token = NextToken(rest)) {
        if (!token.starts_with("CPU") || !IsDigits(token.substr(3))) {
          return LineError(line_number, line, "expected a header of CPU names (CPU0 CPU1 ...)");
        }
        cpus.emplace_back(token);
      }
      have_header = true;
      continue;
    }

    std::string_view rest = SkipBlanks(line);
    size_t colon = rest.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return LineError(line_number, line, "no \"name:\" at the start of the row");
    }
    InterruptRow row;
    std::string_view name = rest.substr(0, colon);
    for (char c : name) {
      if (c <= ' ' || c > '~') return LineError(line_number, line, "bad row name");
    }
    row.name = std::string(name);
    rest.remove_prefix(colon + 1);
    // Counts: up to one per CPU column. Whatever follows is the description, which may itself
    // hold numbers (an arm64 GIC row: "GICv3  27 Level  arch_timer").
    for (;;) {
      std::string_view before = rest;
      std::string_view token = NextToken(rest);
      if (token.empty()) break;
      if (!IsDigits(token) || row.counts.size() == cpus.size()) {
        rest = before;
        break;
      }
      uint64_t value = 0;
      auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
      if (ec != std::errc() || end != token.data() + token.size()) {
        return LineError(line_number, line, "count does not fit in 64 bits");
      }
      row.counts.push_back(value);
    }
    row.description = std::string(SkipBlanks(rest));
    if (!seen.insert(row.name).second) {
      return LineError(line_number, line, "row name repeated");
    }
    rows.push_back(std::move(row));
  }
  if (!have_header) return absl::InvalidArgumentError("/proc/interrupts: empty, no CPU header");
  if (cpus.empty()) return absl::InvalidArgumentError("/proc/interrupts: header names no CPU");
  return Interrupts(std::move(cpus), std::move(rows));
}

}  // namespace kpath
