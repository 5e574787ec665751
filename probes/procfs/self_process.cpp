#include "probes/procfs/self_process.h"

#include <charconv>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "probes/collect/metric_families.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/text.h"
#include "probes/procfs/procfs_metrics.h"
#include "probes/procfs/stat.h"

namespace kpath {

namespace {

template <typename T>
bool ParseNumber(std::string_view text, T& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

absl::StatusOr<ProcPidStat> ParseProcPidStat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos || text.find('(') > close) {
    return absl::InvalidArgumentError("no (comm) field");
  }
  // Fields from 3 (state) on, separated by single spaces.
  std::vector<std::string_view> fields;
  std::string_view rest = text.substr(close + 1);
  while (!rest.empty()) {
    size_t start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    size_t end = rest.find_first_of(" \n");
    fields.push_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end);
  }
  // fields[0] is field 3.
  auto field = [&](size_t number) -> std::string_view {
    return number - 3 < fields.size() ? fields[number - 3] : std::string_view();
  };
  ProcPidStat stat;
  struct Want {
    size_t number;
    const char* name;
    bool ok;
  };
  const Want wants[] = {
      {14, "utime", ParseNumber(field(14), stat.utime_ticks)},
      {15, "stime", ParseNumber(field(15), stat.stime_ticks)},
      {20, "num_threads", ParseNumber(field(20), stat.num_threads)},
      {22, "starttime", ParseNumber(field(22), stat.start_time_ticks)},
      {23, "vsize", ParseNumber(field(23), stat.vsize_bytes)},
      {24, "rss", ParseNumber(field(24), stat.rss_pages)},
  };
  for (const Want& w : wants) {
    if (!w.ok) {
      return absl::InvalidArgumentError(
          fmt::format("field {} ({}) is not a number: \"{}\"", w.number, w.name, field(w.number)));
    }
  }
  return stat;
}

std::optional<uint64_t> ParseMaxOpenFiles(std::string_view limits_text) {
  constexpr std::string_view kLimit = "Max open files";
  size_t at = limits_text.find(kLimit);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = limits_text.substr(at + kLimit.size());
  line = text::FirstLine(line);
  size_t start = line.find_first_not_of(' ');
  if (start == std::string_view::npos) return std::nullopt;
  line.remove_prefix(start);
  std::string_view soft = line.substr(0, line.find(' '));
  uint64_t value = 0;
  if (!ParseNumber(soft, value)) return std::nullopt;  // "unlimited"
  return value;
}

SelfProcessCollector::SelfProcessCollector(std::filesystem::path self,
                                           std::filesystem::path proc_stat, long ticks_per_second,
                                           long page_size)
    : self_(std::move(self)),
      proc_stat_(std::move(proc_stat)),
      ticks_per_second_(ticks_per_second > 0 ? static_cast<double>(ticks_per_second) : 100.0),
      page_size_(page_size > 0 ? static_cast<double>(page_size) : 4096.0) {}

absl::Status SelfProcessCollector::Collect(MetricFamilies& out) {
  absl::StatusOr<std::string> text = ReadFileToString(self_ / "stat", 1 << 16);
  if (!text.ok()) return text.status();
  absl::StatusOr<ProcPidStat> stat = ParseProcPidStat(*text);
  if (!stat.ok()) {
    return absl::Status(stat.status().code(), fmt::format("{}: {}", (self_ / "stat").string(),
                                                          std::string(stat.status().message())));
  }
  if (!boot_time_) {
    if (absl::StatusOr<std::string> proc_stat = ReadFileToString(proc_stat_, 16 << 20);
        proc_stat.ok()) {
      if (absl::StatusOr<ProcStat> parsed = ParseProcStat(*proc_stat); parsed.ok()) {
        boot_time_ = parsed->boot_time;
      }
    }
  }
  FamilyBuilder(procfs_metrics::kProcessCpuSecondsTotal)
      .Add(static_cast<double>(stat->utime_ticks + stat->stime_ticks) / ticks_per_second_)
      .AppendTo(out);
  FamilyBuilder(procfs_metrics::kProcessResidentMemoryBytes)
      .Add(static_cast<double>(stat->rss_pages) * page_size_)
      .AppendTo(out);
  FamilyBuilder(procfs_metrics::kProcessVirtualMemoryBytes)
      .Add(static_cast<double>(stat->vsize_bytes))
      .AppendTo(out);
  FamilyBuilder(procfs_metrics::kProcessThreads)
      .Add(static_cast<double>(stat->num_threads))
      .AppendTo(out);
  if (boot_time_) {
    FamilyBuilder(procfs_metrics::kProcessStartTimeSeconds)
        .Add(static_cast<double>(*boot_time_) +
             static_cast<double>(stat->start_time_ticks) / ticks_per_second_)
        .AppendTo(out);
  }
  std::error_code ec;
  size_t fds = 0;
  for (std::filesystem::directory_iterator it(self_ / "fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++fds;
  }
  if (!ec) {
    FamilyBuilder(procfs_metrics::kProcessOpenFds).Add(static_cast<double>(fds)).AppendTo(out);
  }
  if (absl::StatusOr<std::string> limits = ReadFileToString(self_ / "limits", 1 << 16);
      limits.ok()) {
    if (std::optional<uint64_t> max = ParseMaxOpenFiles(*limits)) {
      FamilyBuilder(procfs_metrics::kProcessMaxFds).Add(static_cast<double>(*max)).AppendTo(out);
    }
  }
  return absl::OkStatus();
}

}  // namespace kpath
