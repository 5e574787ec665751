#include "probes/procfs/meminfo_collector.h"

#include <cmath>
#include <filesystem>
#include <iterator>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "probes/collect/metric_families.h"
#include "probes/procfs/meminfo.h"
#include "probes/procfs/procfs_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

MeminfoCollector::MeminfoCollector(HostPaths paths, absl::Duration growth_window, Clock clock)
    : paths_(std::move(paths)), clock_(std::move(clock)), percpu_growth_(growth_window) {
  if (!clock_) clock_ = absl::Now;  // an empty std::function would throw on call
}

absl::Status MeminfoCollector::Collect(MetricFamilies& out) {
  percpu_bytes_.reset();
  percpu_bytes_per_second_.reset();

  const std::filesystem::path path = paths_.Proc("meminfo");
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  const absl::Time now = clock_();
  absl::StatusOr<Meminfo> meminfo = ParseMeminfo(*text);
  if (!meminfo.ok()) {
    return absl::Status(meminfo.status().code(),
                        absl::StrCat(path.string(), ": ", meminfo.status().message()));
  }

  FamilyBuilder fields(procfs_metrics::kMeminfoBytes);
  for (const MeminfoField& f : meminfo->fields()) {
    // Unit-less fields (HugePages_Total, ...) are counts, not bytes.
    if (f.unit == MeminfoUnit::kBytes)
      fields.Add({{"field", f.name}}, static_cast<double>(f.value));
  }
  fields.AppendTo(out);

  const std::optional<uint64_t> percpu = meminfo->Bytes("Percpu");
  if (!percpu) {
    if (!warned_no_percpu_) {
      spdlog::warn(
          "{} has no Percpu field in kB (it appeared in Linux 4.16): kpath_percpu_bytes and "
          "kpath_percpu_growth_bytes_per_second are not exported",
          path.string());
      warned_no_percpu_ = true;
    }
    return absl::OkStatus();
  }
  percpu_growth_.Add(now, static_cast<double>(*percpu));
  percpu_bytes_ = *percpu;
  percpu_bytes_per_second_ = percpu_growth_.PerSecond();

  FamilyBuilder(procfs_metrics::kPercpuBytes).Add(static_cast<double>(*percpu)).AppendTo(out);
  if (percpu_bytes_per_second_) {
    FamilyBuilder(procfs_metrics::kPercpuGrowthBytesPerSecond)
        .Add(*percpu_bytes_per_second_)
        .AppendTo(out);
  }
  return absl::OkStatus();
}

std::string MeminfoCollector::StatusFragment() const {
  if (!percpu_bytes_) return {};
  std::string fragment =
      absl::StrCat("Percpu ", FormatBytesIEC(static_cast<double>(*percpu_bytes_)));
  if (percpu_bytes_per_second_) {
    std::string rate = FormatBytesIEC(*percpu_bytes_per_second_);
    absl::StrAppend(&fragment, " ", rate.front() == '-' ? "" : "+", rate, "/s");
  }
  return fragment;
}

}  // namespace kpath
