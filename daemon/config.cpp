#include "daemon/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/config_file.h"
#include "daemon/probe_settings.h"
#include "daemon/yaml_reader.h"
#include "fmt/format.h"

namespace kpath {
namespace {

constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};

constexpr absl::Duration kMinSamplingInterval = absl::Milliseconds(100);
constexpr absl::Duration kMaxSamplingInterval = absl::Hours(1);
constexpr absl::Duration kMaxGrowthWindow = absl::Hours(24);
constexpr int64_t kMinLabelLimit = 1;

std::string MechanismList(const std::vector<Mechanism>& mechanisms) {
  std::vector<std::string_view> names;
  for (Mechanism m : mechanisms) names.push_back(MechanismName(m));
  return JoinNames(names);
}

// A parsed "host:port" or "[v6]:port"; empty on success, else what is wrong.
std::string ListenAddressProblem(std::string_view address) {
  std::string_view host;
  std::string_view port;
  if (address.starts_with('[')) {
    const size_t close = address.find(']');
    if (close == std::string_view::npos) return "unterminated \"[\" in the IPv6 address";
    host = address.substr(1, close - 1);
    std::string_view rest = address.substr(close + 1);
    if (!rest.starts_with(':')) return "expected \":port\" after \"]\"";
    port = rest.substr(1);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return "missing \":port\"";
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return "an IPv6 address needs brackets, as in [::]:9477";
    }
  }
  if (host.empty()) return "missing host (use 0.0.0.0 or [::] for all addresses)";
  // civetweb reads "," as a list separator; whitespace is never part of a host.
  if (std::any_of(host.begin(), host.end(),
                  [](char c) { return c == ',' || absl::ascii_isspace(c); })) {
    return "the host contains a comma or whitespace";
  }
  int port_number = 0;
  if (port.empty() || !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(std::string(port), &port_number) || port_number < 1 ||
      port_number > 65535) {
    return absl::StrCat("the port must be a number from 1 to 65535, got \"", std::string(port),
                        "\"");
  }
  return "";
}

// Walks the document and fills a Config: the daemon's own settings here, each probe's section in
// probe_settings.cpp. Each method returns the first error found.
class ConfigParser {
 public:
  explicit ConfigParser(const YamlReader& reader) : reader_(reader) {}

  absl::Status Parse(const YAML::Node& root, Config& config) {
    if (root.IsNull()) return absl::OkStatus();  // "~" or "---" alone: the defaults
    if (!root.IsMap()) {
      return reader_.Error(root.Mark(), "expected a mapping of settings at the top level, got " +
                                            reader_.Describe(root));
    }
    absl::Status status = reader_.ForEachKey(
        root, "",
        {"listen_address", "log_level", "sampling_interval", "paths", "meminfo", "percpu",
         "madvise", "cgroups", "labels", "kubernetes", "bpf", "hooks", "irqoff", "slab", "probes",
         "web"},
        [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) {
          return ReadSetting(key, key_node, value, config);
        });
    if (!status.ok()) return status;
    return CheckGrowthWindow(config);
  }

 private:
  absl::Status ReadSetting(const std::string& key, const YAML::Node& key_node,
                           const YAML::Node& value, Config& config) {
    if (key == "listen_address") return ParseListenAddress(key_node, value, config);
    if (key == "log_level") return ParseLogLevel(key_node, value, config);
    if (key == "sampling_interval") {
      interval_mark_ = key_node.Mark();
      return reader_.Duration(key_node, value, key, kMinSamplingInterval, kMaxSamplingInterval,
                              config.sampling_interval);
    }
    if (key == "paths") return ParsePaths(key_node, value, config);
    if (key == "meminfo") return ParseMeminfo(key_node, value, config);
    if (key == "percpu") return ReadPercpuSettings(reader_, key_node, value, config.percpu);
    if (key == "madvise") return ReadMadviseSettings(reader_, key_node, value, config.madvise);
    if (key == "cgroups") return ReadCgroupsSettings(reader_, key_node, value, config.cgroups);
    if (key == "labels") return ParseLabels(key_node, value, config.labels);
    if (key == "kubernetes") {
      return ReadKubernetesSettings(reader_, key_node, value, config.kubernetes);
    }
    if (key == "bpf") return ParseBpf(key_node, value, config);
    if (key == "hooks") return ReadHooksSettings(reader_, key_node, value, config.hooks);
    if (key == "irqoff") return ReadIrqOffSettings(reader_, key_node, value, config.irqoff);
    if (key == "slab") return ReadSlabSettings(reader_, key_node, value, config.slab);
    if (key == "web") return ParseWeb(key_node, value, config.web);
    return ParseProbes(key_node, value, config);
  }

  absl::Status ParseListenAddress(const YAML::Node& key_node, const YAML::Node& value,
                                  Config& config) const {
    constexpr std::string_view kExpected = "host:port such as 0.0.0.0:9477 or [::]:9477";
    absl::StatusOr<std::string> text = reader_.Scalar(key_node, value, "listen_address", kExpected);
    if (!text.ok()) return text.status();
    if (std::string problem = ListenAddressProblem(*text); !problem.empty()) {
      return reader_.Error(
          key_node.Mark(),
          fmt::format("listen_address: expected {}, got \"{}\": {}", kExpected, *text, problem));
    }
    config.listen_address = *std::move(text);
    return absl::OkStatus();
  }

  absl::Status ParseLogLevel(const YAML::Node& key_node, const YAML::Node& value,
                             Config& config) const {
    const std::string expected = "one of " + JoinNames(kLogLevels);
    absl::StatusOr<std::string> text = reader_.Scalar(key_node, value, "log_level", expected);
    if (!text.ok()) return text.status();
    if (std::find(kLogLevels.begin(), kLogLevels.end(), *text) == kLogLevels.end()) {
      return reader_.Expected(key_node, value, "log_level", expected);
    }
    config.log_level = *std::move(text);
    return absl::OkStatus();
  }

  absl::Status ParsePaths(const YAML::Node& key_node, const YAML::Node& value,
                          Config& config) const {
    return reader_.Section(
        key_node, value, "paths", {"procfs", "sysfs"},
        [&](const std::string& key, const YAML::Node& child_key,
            const YAML::Node& child) -> absl::Status {
          std::string& root = key == "procfs" ? config.procfs_root : config.sysfs_root;
          return reader_.AbsolutePath(child_key, child, KeyPath("paths", key), root);
        });
  }

  absl::Status ParseMeminfo(const YAML::Node& key_node, const YAML::Node& value, Config& config) {
    return reader_.Section(key_node, value, "meminfo", {"percpu_growth_window"},
                           [&](const std::string& key, const YAML::Node& child_key,
                               const YAML::Node& child) -> absl::Status {
                             window_mark_ = child_key.Mark();
                             // CheckGrowthWindow checks the lower bound, 2 x sampling_interval.
                             return reader_.Duration(child_key, child, KeyPath("meminfo", key),
                                                     absl::Nanoseconds(1), kMaxGrowthWindow,
                                                     config.percpu.growth_window);
                           });
  }

  absl::Status ParseWeb(const YAML::Node& key_node, const YAML::Node& value,
                        WebServerConfig& web) const {
    return reader_.Section(
        key_node, value, "web",
        {"config_file", "max_connections", "request_timeout", "keep_alive_timeout"},
        [&](const std::string& key, const YAML::Node& child_key,
            const YAML::Node& child) -> absl::Status {
          const std::string path = KeyPath("web", key);
          if (key == "max_connections") {
            return reader_.Int(child_key, child, path, 4, 1024, web.max_connections);
          }
          if (key == "request_timeout") {
            return reader_.Duration(child_key, child, path, absl::Milliseconds(100),
                                    absl::Minutes(5), web.request_timeout);
          }
          if (key == "keep_alive_timeout") {
            return reader_.Duration(child_key, child, path, absl::ZeroDuration(), absl::Minutes(10),
                                    web.keep_alive_timeout);
          }
          // Empty: no web configuration file.
          if (child.IsNull() || (child.IsScalar() && child.Scalar().empty())) {
            web.config_file.clear();
            return absl::OkStatus();
          }
          return reader_.AbsolutePath(child_key, child, path, web.config_file);
        });
  }

  // The growth rate is a least-squares slope over the window, which needs at least 2 samples.
  absl::Status CheckGrowthWindow(const Config& config) const {
    const absl::Duration shortest = 2 * config.sampling_interval;
    if (config.percpu.growth_window >= shortest) return absl::OkStatus();
    const std::string numbers = fmt::format(
        "meminfo.percpu_growth_window ({}{}) must be at least 2 x sampling_interval ({}{}) = {}, "
        "so that the growth rate is fitted over at least 2 samples",
        absl::FormatDuration(config.percpu.growth_window), window_mark_ ? "" : ", the default",
        absl::FormatDuration(config.sampling_interval), interval_mark_ ? "" : ", the default",
        absl::FormatDuration(shortest));
    // Point at the window when the file sets it, else at the interval that made it too short.
    const YAML::Mark mark =
        window_mark_ ? *window_mark_ : interval_mark_.value_or(YAML::Mark::null_mark());
    return reader_.Error(mark, numbers);
  }

  absl::Status ParseLabels(const YAML::Node& key_node, const YAML::Node& value,
                           LabelLimits& labels) const {
    return reader_.Section(key_node, value, "labels", {"comm", "caller", "unit", "pod"},
                           [&](const std::string& key, const YAML::Node& child_key,
                               const YAML::Node& child) -> absl::Status {
                             int& limit = key == "comm"     ? labels.comm
                                          : key == "caller" ? labels.caller
                                          : key == "pod"    ? labels.pod
                                                            : labels.unit;
                             return reader_.Int(child_key, child, KeyPath("labels", key),
                                                kMinLabelLimit, kMaxLabelLimit, limit);
                           });
  }

  absl::Status ParseBpf(const YAML::Node& key_node, const YAML::Node& value, Config& config) const {
    return reader_.Section(
        key_node, value, "bpf", {"enabled", "selftest_interval"},
        [&](const std::string& key, const YAML::Node& child_key,
            const YAML::Node& child) -> absl::Status {
          if (key == "selftest_interval") {
            return reader_.Duration(child_key, child, KeyPath("bpf", key), absl::Seconds(1),
                                    absl::Hours(1), config.selftest_interval);
          }
          return reader_.Bool(child_key, child, KeyPath("bpf", key), config.bpf_enabled);
        });
  }

  absl::Status ParseProbes(const YAML::Node& key_node, const YAML::Node& value,
                           Config& config) const {
    return reader_.Section(
        key_node, value, "probes", KnownProbeNames(),
        [&](const std::string& name, const YAML::Node& name_node,
            const YAML::Node& settings) -> absl::Status {
          ProbeConfig probe;
          if (absl::Status status = ParseProbe(name, name_node, settings, probe); !status.ok()) {
            return status;
          }
          // The defaults spelled out (as the shipped file does) mean "absent".
          if (probe.mechanisms == DefaultMechanisms(name)) probe.mechanisms.clear();
          if (probe == ProbeConfig{}) return absl::OkStatus();
          config.probes[name] = std::move(probe);
          return absl::OkStatus();
        },
        "probe");
  }

  absl::Status ParseProbe(const std::string& name, const YAML::Node& name_node,
                          const YAML::Node& settings, ProbeConfig& probe) const {
    const std::string path = KeyPath("probes", name);
    return reader_.Section(
        name_node, settings, path, {"enabled", "mechanisms"},
        [&](const std::string& key, const YAML::Node& child_key,
            const YAML::Node& child) -> absl::Status {
          if (key == "enabled") {
            return reader_.Bool(child_key, child, KeyPath(path, key), probe.enabled);
          }
          return ParseMechanisms(name, child_key, child, KeyPath(path, key), probe.mechanisms);
        });
  }

  absl::Status ParseMechanisms(const std::string& probe, const YAML::Node& key_node,
                               const YAML::Node& value, std::string_view path,
                               std::vector<Mechanism>& out) const {
    const std::vector<Mechanism>& supported = SupportedMechanisms(probe);
    const std::string expected =
        fmt::format("a non-empty list drawn from [{}]", MechanismList(supported));
    if (!value.IsSequence() || value.size() == 0) {
      return reader_.Expected(key_node, value, path, expected);
    }
    std::vector<Mechanism> mechanisms;
    for (const YAML::Node& item : value) {
      if (!item.IsScalar()) return reader_.Expected(item, item, path, "a mechanism name");
      const std::optional<Mechanism> mechanism = ParseMechanism(item.Scalar());
      if (!mechanism) {
        return reader_.Error(item.Mark(),
                             fmt::format("{}: unknown mechanism \"{}\" ({} can use: {})", path,
                                         item.Scalar(), probe, MechanismList(supported)));
      }
      if (std::find(supported.begin(), supported.end(), *mechanism) == supported.end()) {
        return reader_.Error(
            item.Mark(), fmt::format("{}: {} cannot attach through \"{}\" (it can use: {})", path,
                                     probe, item.Scalar(), MechanismList(supported)));
      }
      if (std::find(mechanisms.begin(), mechanisms.end(), *mechanism) != mechanisms.end()) {
        return reader_.Error(
            item.Mark(), fmt::format("{}: \"{}\" is listed more than once", path, item.Scalar()));
      }
      mechanisms.push_back(*mechanism);
    }
    out = std::move(mechanisms);
    return absl::OkStatus();
  }

  const YamlReader& reader_;
  // Where the file sets these, to point the growth-window check at the line to change.
  std::optional<YAML::Mark> interval_mark_;
  std::optional<YAML::Mark> window_mark_;
};

}  // namespace

absl::StatusOr<Config> ParseConfig(std::string_view yaml_text, std::string_view source) {
  const YamlReader reader(source);
  ConfigParser parser(reader);
  Config config;
  absl::Status status = reader.ReadDocument(
      yaml_text, [&](const YAML::Node& root) { return parser.Parse(root, config); });
  if (!status.ok()) return status;
  return config;
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadConfigFileText(path);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

}  // namespace kpath
