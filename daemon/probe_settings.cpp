#include "daemon/probe_settings.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "fmt/format.h"

namespace kpath {
namespace {

// Slab cache names as /sys/kernel/slab and /proc/slabinfo spell them ("dentry",
// "kmalloc-rcl-64"): printable, no blank, no '/'; at most 100, each at most 64 characters.
absl::Status ReadSlabCacheNames(const YamlReader& reader, const YAML::Node& key_node,
                                const YAML::Node& value, std::string_view path,
                                std::vector<std::string>& out) {
  if (!value.IsSequence()) {
    return reader.Expected(key_node, value, path, "a list of slab cache names");
  }
  if (value.size() > 100) {
    return reader.Error(key_node.Mark(), fmt::format("{}: at most 100 caches", path));
  }
  std::vector<std::string> names;
  for (const YAML::Node& item : value) {
    const bool valid = item.IsScalar() && !item.Scalar().empty() && item.Scalar().size() <= 64 &&
                       item.Scalar() != "." && item.Scalar() != ".." &&
                       std::all_of(item.Scalar().begin(), item.Scalar().end(), [](char c) {
                         return absl::ascii_isgraph(static_cast<unsigned char>(c)) && c != '/';
                       });
    if (!valid) return reader.Expected(item, item, path, "a slab cache name");
    if (std::find(names.begin(), names.end(), item.Scalar()) != names.end()) {
      return reader.Error(item.Mark(),
                          fmt::format("{}: \"{}\" is listed more than once", path, item.Scalar()));
    }
    names.push_back(item.Scalar());
  }
  out = std::move(names);
  return absl::OkStatus();
}

// A list of kernel function names or "category:event" tracepoints (may be empty).
absl::Status ReadNameList(const YamlReader& reader, const YAML::Node& key_node,
                          const YAML::Node& value, std::string_view path,
                          std::vector<std::string>& out) {
  if (!value.IsSequence()) {
    return reader.Expected(key_node, value, path,
                           "a list of function names or category:event tracepoints");
  }
  std::vector<std::string> names;
  for (const YAML::Node& item : value) {
    const bool valid = item.IsScalar() && !item.Scalar().empty() &&
                       std::all_of(item.Scalar().begin(), item.Scalar().end(), [](char c) {
                         return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                c == ':' || c == '.';
                       });
    if (!valid) return reader.Expected(item, item, path, "a function name or category:event");
    names.push_back(item.Scalar());
  }
  out = std::move(names);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadKubernetesSettings(const YamlReader& reader, const YAML::Node& key_node,
                                    const YAML::Node& value, KubernetesConfig& kubernetes) {
  using Mode = KubernetesConfig::PodLabelsMode;
  using By = KubernetesConfig::AttributeBy;
  static constexpr std::array<std::pair<std::string_view, Mode>, 3> kModes{
      {{"auto", Mode::kAuto}, {"on", Mode::kOn}, {"off", Mode::kOff}}};
  static constexpr std::array<std::pair<std::string_view, By>, 3> kBy{
      {{"auto", By::kAuto}, {"cgroup_id", By::kCgroupId}, {"process", By::kProcess}}};
  return reader.Section(
      key_node, value, "kubernetes", {"pod_labels", "attribute_by", "pod_logs", "container_logs"},
      [&](const std::string& key, const YAML::Node& child_key,
          const YAML::Node& child) -> absl::Status {
        const std::string path = KeyPath("kubernetes", key);
        if (key == "pod_labels")
          return reader.Choice(child_key, child, path, kModes, kubernetes.pod_labels);
        if (key == "attribute_by")
          return reader.Choice(child_key, child, path, kBy, kubernetes.attribute_by);
        if (key == "pod_logs")
          return reader.AbsolutePath(child_key, child, path, kubernetes.pod_logs);
        return reader.AbsolutePath(child_key, child, path, kubernetes.container_logs);
      });
}

absl::Status ReadPercpuSettings(const YamlReader& reader, const YAML::Node& key_node,
                                const YAML::Node& value, PercpuConfig& percpu) {
  return reader.Section(key_node, value, "percpu", {"max_tracked_allocations", "caller_from_stack"},
                        [&](const std::string& key, const YAML::Node& child_key,
                            const YAML::Node& child) -> absl::Status {
                          const std::string path = KeyPath("percpu", key);
                          if (key == "caller_from_stack") {
                            return reader.Bool(child_key, child, path, percpu.caller_from_stack);
                          }
                          int max = 0;
                          absl::Status status =
                              reader.Int(child_key, child, path, 1024, 4 << 20, max);
                          percpu.max_tracked_allocations = static_cast<uint32_t>(max);
                          return status;
                        });
}

absl::Status ReadMadviseSettings(const YamlReader& reader, const YAML::Node& key_node,
                                 const YAML::Node& value, MadviseConfig& madvise) {
  return reader.Section(key_node, value, "madvise", {"storm_calls_per_second"},
                        [&](const std::string& key, const YAML::Node& child_key,
                            const YAML::Node& child) -> absl::Status {
                          return reader.Int(child_key, child, KeyPath("madvise", key), 1, 100000000,
                                            madvise.storm_calls_per_second);
                        });
}

absl::Status ReadCgroupsSettings(const YamlReader& reader, const YAML::Node& key_node,
                                 const YAML::Node& value, CgroupsConfig& cgroups) {
  return reader.Section(key_node, value, "cgroups", {"churn_burst_per_second"},
                        [&](const std::string& key, const YAML::Node& child_key,
                            const YAML::Node& child) -> absl::Status {
                          return reader.Int(child_key, child, KeyPath("cgroups", key), 1, 1000000,
                                            cgroups.churn_burst_per_second);
                        });
}

// irqoff: the threshold must span at least 2 periods, so that a region's length, known to
// +-period/2 by the timer methods, is right to 25 % at the threshold. max_window spans at least
// one scrape interval (Prometheus allows down to 1s) and at most an hour.
absl::Status ReadIrqOffSettings(const YamlReader& reader, const YAML::Node& key_node,
                                const YAML::Node& value, IrqOffConfig& irqoff) {
  std::optional<YAML::Mark> mark;
  absl::Status status = reader.Section(
      key_node, value, "irqoff", {"threshold", "period", "max_window", "ignore_vm_pauses"},
      [&](const std::string& key, const YAML::Node& child_key,
          const YAML::Node& child) -> absl::Status {
        mark = child_key.Mark();
        if (key == "threshold") {
          return reader.Duration(child_key, child, KeyPath("irqoff", key), absl::Microseconds(500),
                                 absl::Seconds(10), irqoff.threshold);
        }
        if (key == "ignore_vm_pauses") {
          return reader.Bool(child_key, child, KeyPath("irqoff", key), irqoff.ignore_vm_pauses);
        }
        if (key == "max_window") {
          return reader.Duration(child_key, child, KeyPath("irqoff", key), absl::Seconds(1),
                                 absl::Hours(1), irqoff.max_window);
        }
        return reader.Duration(child_key, child, KeyPath("irqoff", key), absl::Microseconds(250),
                               absl::Milliseconds(100), irqoff.period);
      });
  if (!status.ok()) return status;
  if (irqoff.threshold < 2 * irqoff.period) {
    return reader.Error(
        mark.value_or(key_node.Mark()),
        fmt::format("irqoff.threshold ({}) must be at least 2 x irqoff.period ({})",
                    absl::FormatDuration(irqoff.threshold), absl::FormatDuration(irqoff.period)));
  }
  return absl::OkStatus();
}

absl::Status ReadSlabSettings(const YamlReader& reader, const YAML::Node& key_node,
                              const YAML::Node& value, SlabConfig& slab) {
  return reader.Section(key_node, value, "slab", {"caches", "top_n", "interval", "max_read_time"},
                        [&](const std::string& key, const YAML::Node& child_key,
                            const YAML::Node& child) -> absl::Status {
                          const std::string path = KeyPath("slab", key);
                          if (key == "caches")
                            return ReadSlabCacheNames(reader, child_key, child, path, slab.caches);
                          if (key == "top_n")
                            return reader.Int(child_key, child, path, 0, 1000, slab.top_n);
                          if (key == "interval") {
                            return reader.Duration(child_key, child, path, absl::Seconds(1),
                                                   absl::Hours(24), slab.interval);
                          }
                          return reader.Duration(child_key, child, path, absl::Milliseconds(1),
                                                 absl::Seconds(10), slab.max_read_time);
                        });
}

absl::Status ReadHooksSettings(const YamlReader& reader, const YAML::Node& key_node,
                               const YAML::Node& value, HooksConfig& hooks) {
  std::optional<YAML::Mark> slice_mark;
  absl::Status status = reader.Section(
      key_node, value, "hooks",
      {"enabled", "refresh_interval", "max_info_series", "top_programs", "bpf_stats",
       "bpf_stats_slice", "hot_functions"},
      [&](const std::string& key, const YAML::Node& child_key,
          const YAML::Node& child) -> absl::Status {
        const std::string path = KeyPath("hooks", key);
        if (key == "enabled") return reader.Bool(child_key, child, path, hooks.enabled);
        if (key == "refresh_interval") {
          return reader.Duration(child_key, child, path, absl::Milliseconds(500), absl::Hours(1),
                                 hooks.refresh_interval);
        }
        if (key == "max_info_series") {
          return reader.Int(child_key, child, path, 1, kMaxLabelLimit, hooks.max_info_series);
        }
        if (key == "top_programs") {
          return reader.Int(child_key, child, path, 1, kMaxLabelLimit, hooks.top_programs);
        }
        if (key == "bpf_stats") {
          constexpr std::string_view kExpected = "off, always or sampled";
          absl::StatusOr<std::string> text = reader.Scalar(child_key, child, path, kExpected);
          if (!text.ok()) return text.status();
          std::optional<BpfStatsMode> mode = ParseBpfStatsMode(*text);
          if (!mode) return reader.Expected(child_key, child, path, kExpected);
          hooks.bpf_stats = *mode;
          return absl::OkStatus();
        }
        if (key == "bpf_stats_slice") {
          slice_mark = child_key.Mark();
          return reader.Duration(child_key, child, path, absl::Milliseconds(10), absl::Hours(1),
                                 hooks.bpf_stats_slice);
        }
        return ReadNameList(reader, child_key, child, path, hooks.hot_functions);
      });
  if (!status.ok()) return status;
  // The default slice follows a short refresh_interval; a slice the file sets is checked.
  if (!slice_mark && hooks.bpf_stats_slice >= hooks.refresh_interval) {
    hooks.bpf_stats_slice = hooks.refresh_interval / 5;
  }
  if (hooks.bpf_stats_slice >= hooks.refresh_interval) {
    return reader.Error(
        slice_mark.value_or(key_node.Mark()),
        fmt::format("hooks.bpf_stats_slice ({}) must be shorter than hooks.refresh_interval ({})",
                    absl::FormatDuration(hooks.bpf_stats_slice),
                    absl::FormatDuration(hooks.refresh_interval)));
  }
  return absl::OkStatus();
}

}  // namespace kpath
