#include "daemon/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kpath {
namespace {

// Every probe the configuration knows, with the mechanisms it can attach through in its own
// order of preference. A probe listed here must handle each of these mechanisms.
struct ProbeMechanisms {
  std::string_view probe;
  std::vector<Mechanism> mechanisms;
  // The default of probes.<probe>.mechanisms where it is not all of `mechanisms`.
  std::vector<Mechanism> defaults = {};
};

const std::vector<ProbeMechanisms>& ProbeTable() {
  static const auto* table = new std::vector<ProbeMechanisms>{
      {"percpu_alloc",
       {Mechanism::kTpBtf, Mechanism::kRawTp, Mechanism::kTracepoint, Mechanism::kFentry,
        Mechanism::kKprobe}},
      {"cgroup_churn", {Mechanism::kTpBtf, Mechanism::kRawTp, Mechanism::kTracepoint}},
      // The syscall tracepoint only when asked for, as for slabinfo_readers below.
      {"madvise",
       {Mechanism::kFentry, Mechanism::kKprobe, Mechanism::kTracepoint},
       {Mechanism::kFentry, Mechanism::kKprobe}},
      {"tlb_flush", {Mechanism::kTpBtf, Mechanism::kRawTp, Mechanism::kTracepoint}},
      // preemptirq tracepoints (exact), then perf_event: NMI sampling, else software timers.
      {"irqoff",
       {Mechanism::kTpBtf, Mechanism::kRawTp, Mechanism::kTracepoint, Mechanism::kPerfEvent}},
      // The syscall tracepoints only when asked for: they tax every system call of the host.
      {"slabinfo_readers",
       {Mechanism::kFentry, Mechanism::kKprobe, Mechanism::kTracepoint},
       {Mechanism::kFentry, Mechanism::kKprobe}},
  };
  return *table;
}

constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};

constexpr absl::Duration kMinSamplingInterval = absl::Milliseconds(100);
constexpr absl::Duration kMaxSamplingInterval = absl::Hours(1);
constexpr absl::Duration kMaxGrowthWindow = absl::Hours(24);
constexpr int64_t kMinLabelLimit = 1;
constexpr int64_t kMaxLabelLimit = 10000;

// A config file is a few kilobytes; a huge one is the wrong file (or /dev/zero).
constexpr size_t kMaxConfigFileBytes = 1 << 20;

// Debian's abseil has its own absl::string_view, distinct from std::string_view, so absl::StrJoin
// cannot join these std::string_view names.
std::string JoinNames(std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string MechanismList(const std::vector<Mechanism>& mechanisms) {
  std::vector<std::string_view> names;
  for (Mechanism m : mechanisms) names.push_back(MechanismName(m));
  return JoinNames(names);
}

// "<parent>.<key>", or "<key>" at the top level: how a setting is named in messages.
std::string KeyPath(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

// What a node holds, for "expected X, got Y".
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar: {
      constexpr size_t kMaxShown = 60;
      const std::string& text = node.Scalar();
      if (text.size() <= kMaxShown) return absl::StrCat("\"", text, "\"");
      return absl::StrCat("\"", text.substr(0, kMaxShown), "...\"");
    }
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
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

// Walks the document and fills a Config. Each method returns the first error found, formatted
// "<source>:<line>: <message>".
class ConfigParser {
 public:
  explicit ConfigParser(std::string_view source) : source_(source) {}

  absl::Status Parse(const YAML::Node& root, Config& config) {
    if (root.IsNull()) return absl::OkStatus();  // "~" or "---" alone: the defaults
    if (!root.IsMap()) {
      return Error(
          root.Mark(),
          absl::StrCat("expected a mapping of settings at the top level, got ", Describe(root)));
    }
    absl::Status status = ForEachKey(
        root, "",
        {"listen_address", "log_level", "sampling_interval", "paths", "meminfo", "percpu",
         "madvise", "labels", "bpf", "hooks", "irqoff", "slab", "probes", "web"},
        [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) {
          return ParseSetting(key, key_node, value, config);
        });
    if (!status.ok()) return status;
    return CheckGrowthWindow(config);
  }

 private:
  absl::Status ParseSetting(const std::string& key, const YAML::Node& key_node,
                            const YAML::Node& value, Config& config) {
    if (key == "listen_address") return ParseListenAddress(key_node, value, config);
    if (key == "log_level") return ParseLogLevel(key_node, value, config);
    if (key == "sampling_interval") {
      interval_mark_ = key_node.Mark();
      return ParseDuration(key_node, value, key, kMinSamplingInterval, kMaxSamplingInterval,
                           config.sampling_interval);
    }
    if (key == "paths") return ParsePaths(key_node, value, config);
    if (key == "meminfo") return ParseMeminfo(key_node, value, config);
    if (key == "percpu") return ParsePercpu(key_node, value, config);
    if (key == "madvise") return ParseMadvise(key_node, value, config);
    if (key == "labels") return ParseLabels(key_node, value, config.labels);
    if (key == "bpf") return ParseBpf(key_node, value, config);
    if (key == "hooks") return ParseHooks(key_node, value, config.hooks);
    if (key == "irqoff") return ParseIrqOff(key_node, value, config.irqoff);
    if (key == "slab") return ParseSlab(key_node, value, config.slab);
    if (key == "web") return ParseWeb(key_node, value, config.web);
    return ParseProbes(key_node, value, config);
  }

  using KeyHandler = std::function<absl::Status(const std::string& key, const YAML::Node& key_node,
                                                const YAML::Node& value)>;

  absl::Status Error(const YAML::Mark& mark, absl::string_view message) const {
    if (mark.is_null()) return absl::InvalidArgumentError(absl::StrCat(source_, ": ", message));
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", mark.line + 1, ": ", message));
  }

  // Calls `handler` for each entry of `map` after checking that its key is a known, unrepeated
  // name; `noun` names what the keys are in messages ("key", "probe"). yaml-cpp keeps both entries
  // of a repeated key (and lookups see only the first), so repetitions are found here.
  absl::Status ForEachKey(const YAML::Node& map, absl::string_view path,
                          const std::vector<std::string_view>& valid_keys,
                          const KeyHandler& handler, absl::string_view noun = "key") const {
    const std::string where = path.empty() ? "" : absl::StrCat(" in \"", path, "\"");
    std::map<std::string, int, std::less<>> first_line_of_key;
    for (const auto& entry : map) {
      const YAML::Node& key_node = entry.first;
      if (!key_node.IsScalar()) {
        return Error(key_node.Mark(),
                     absl::StrCat("expected a setting name", where, ", got ", Describe(key_node)));
      }
      const std::string& key = key_node.Scalar();
      if (std::find(valid_keys.begin(), valid_keys.end(), key) == valid_keys.end()) {
        return Error(key_node.Mark(), absl::StrCat("unknown ", noun, " \"", key, "\"", where,
                                                   " (valid: ", JoinNames(valid_keys), ")"));
      }
      const auto [previous, inserted] = first_line_of_key.emplace(key, key_node.Mark().line + 1);
      if (!inserted) {
        return Error(key_node.Mark(), absl::StrCat("duplicate key \"", key, "\"", where,
                                                   " (first on line ", previous->second, ")"));
      }
      if (absl::Status status = handler(key, key_node, entry.second); !status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // A section such as `paths:` holds a mapping; left empty it keeps the defaults.
  absl::Status CheckSection(const YAML::Node& key_node, const YAML::Node& value,
                            absl::string_view path) const {
    if (value.IsMap() || value.IsNull()) return absl::OkStatus();
    return Error(key_node.Mark(),
                 absl::StrCat(path, ": expected a mapping, got ", Describe(value)));
  }

  // Errors about a scalar value point at its key's line: yaml-cpp marks an empty value at the
  // token after it, which may be on the next line.
  absl::StatusOr<std::string> Scalar(const YAML::Node& key_node, const YAML::Node& value,
                                     absl::string_view path, absl::string_view expected) const {
    if (!value.IsScalar()) {
      return Error(key_node.Mark(),
                   absl::StrCat(path, ": expected ", expected, ", got ", Describe(value)));
    }
    return value.Scalar();
  }

  absl::Status ParseListenAddress(const YAML::Node& key_node, const YAML::Node& value,
                                  Config& config) const {
    constexpr absl::string_view kExpected = "host:port such as 0.0.0.0:9477 or [::]:9477";
    absl::StatusOr<std::string> text = Scalar(key_node, value, "listen_address", kExpected);
    if (!text.ok()) return text.status();
    if (std::string problem = ListenAddressProblem(*text); !problem.empty()) {
      return Error(key_node.Mark(), absl::StrCat("listen_address: expected ", kExpected, ", got \"",
                                                 *text, "\": ", problem));
    }
    config.listen_address = *std::move(text);
    return absl::OkStatus();
  }

  absl::Status ParseLogLevel(const YAML::Node& key_node, const YAML::Node& value,
                             Config& config) const {
    const std::string expected = absl::StrCat("one of ", JoinNames(kLogLevels));
    absl::StatusOr<std::string> text = Scalar(key_node, value, "log_level", expected);
    if (!text.ok()) return text.status();
    if (std::find(kLogLevels.begin(), kLogLevels.end(), *text) == kLogLevels.end()) {
      return Error(key_node.Mark(),
                   absl::StrCat("log_level: expected ", expected, ", got ", Describe(value)));
    }
    config.log_level = *std::move(text);
    return absl::OkStatus();
  }

  absl::Status ParseDuration(const YAML::Node& key_node, const YAML::Node& value,
                             absl::string_view path, absl::Duration min, absl::Duration max,
                             absl::Duration& out) const {
    constexpr absl::string_view kExpected = "a duration such as 5s or 500ms";
    absl::StatusOr<std::string> text = Scalar(key_node, value, path, kExpected);
    if (!text.ok()) return text.status();
    absl::Duration duration;
    if (!absl::ParseDuration(*text, &duration)) {
      return Error(key_node.Mark(),
                   absl::StrCat(path, ": expected ", kExpected, ", got ", Describe(value)));
    }
    if (duration < min || duration > max) {
      return Error(key_node.Mark(),
                   absl::StrCat(path, ": must be from ", absl::FormatDuration(min), " to ",
                                absl::FormatDuration(max), ", got ", *text));
    }
    out = duration;
    return absl::OkStatus();
  }

  absl::Status ParseInt(const YAML::Node& key_node, const YAML::Node& value, absl::string_view path,
                        int64_t min, int64_t max, int& out) const {
    constexpr absl::string_view kExpected = "a whole number";
    absl::StatusOr<std::string> text = Scalar(key_node, value, path, kExpected);
    if (!text.ok()) return text.status();
    int64_t number = 0;
    if (!absl::SimpleAtoi(*text, &number)) {
      return Error(key_node.Mark(),
                   absl::StrCat(path, ": expected ", kExpected, ", got ", Describe(value)));
    }
    if (number < min || number > max) {
      return Error(key_node.Mark(),
                   absl::StrCat(path, ": must be from ", min, " to ", max, ", got ", number));
    }
    out = static_cast<int>(number);
    return absl::OkStatus();
  }

  absl::Status ParseBool(const YAML::Node& key_node, const YAML::Node& value,
                         absl::string_view path, bool& out) const {
    constexpr absl::string_view kExpected = "true or false";
    absl::StatusOr<std::string> text = Scalar(key_node, value, path, kExpected);
    if (!text.ok()) return text.status();
    if (!YAML::convert<bool>::decode(value, out)) {
      return Error(key_node.Mark(),
                   absl::StrCat(path, ": expected ", kExpected, ", got ", Describe(value)));
    }
    return absl::OkStatus();
  }

  absl::Status ParseAbsolutePath(const YAML::Node& key_node, const YAML::Node& value,
                                 absl::string_view path, std::string& out) const {
    constexpr absl::string_view kExpected = "an absolute path";
    absl::StatusOr<std::string> text = Scalar(key_node, value, path, kExpected);
    if (!text.ok()) return text.status();
    if (!text->starts_with('/')) {
      return Error(key_node.Mark(),
                   absl::StrCat(path, ": expected ", kExpected, ", got ", Describe(value)));
    }
    out = *std::move(text);
    return absl::OkStatus();
  }

  absl::Status ParsePaths(const YAML::Node& key_node, const YAML::Node& value,
                          Config& config) const {
    if (absl::Status status = CheckSection(key_node, value, "paths"); !status.ok()) return status;
    return ForEachKey(value, "paths", {"procfs", "sysfs"},
                      [&](const std::string& key, const YAML::Node& child_key,
                          const YAML::Node& child) -> absl::Status {
                        std::string& root =
                            key == "procfs" ? config.procfs_root : config.sysfs_root;
                        return ParseAbsolutePath(child_key, child, KeyPath("paths", key), root);
                      });
  }

  absl::Status ParseMeminfo(const YAML::Node& key_node, const YAML::Node& value, Config& config) {
    if (absl::Status status = CheckSection(key_node, value, "meminfo"); !status.ok()) {
      return status;
    }
    return ForEachKey(value, "meminfo", {"percpu_growth_window"},
                      [&](const std::string& key, const YAML::Node& child_key,
                          const YAML::Node& child) -> absl::Status {
                        window_mark_ = child_key.Mark();
                        // CheckGrowthWindow checks the lower bound, 2 x sampling_interval.
                        return ParseDuration(child_key, child, KeyPath("meminfo", key),
                                             absl::Nanoseconds(1), kMaxGrowthWindow,
                                             config.percpu_growth_window);
                      });
  }

  absl::Status ParsePercpu(const YAML::Node& key_node, const YAML::Node& value,
                           Config& config) const {
    if (absl::Status status = CheckSection(key_node, value, "percpu"); !status.ok()) {
      return status;
    }
    return ForEachKey(value, "percpu", {"max_tracked_allocations", "caller_from_stack"},
                      [&](const std::string& key, const YAML::Node& child_key,
                          const YAML::Node& child) -> absl::Status {
                        if (key == "caller_from_stack") {
                          return ParseBool(child_key, child, KeyPath("percpu", key),
                                           config.percpu_caller_from_stack);
                        }
                        int max = 0;
                        absl::Status status =
                            ParseInt(child_key, child, KeyPath("percpu", key), 1024, 4 << 20, max);
                        config.percpu_max_tracked_allocations = static_cast<uint32_t>(max);
                        return status;
                      });
  }

  // irqoff: the threshold must span at least 2 periods, so that a region's length, known to
  // +-period/2 by the timer methods, is right to 25 % at the threshold.
  absl::Status ParseIrqOff(const YAML::Node& key_node, const YAML::Node& value,
                           IrqOffConfig& irqoff) const {
    if (absl::Status status = CheckSection(key_node, value, "irqoff"); !status.ok()) return status;
    std::optional<YAML::Mark> mark;
    absl::Status status = ForEachKey(
        value, "irqoff", {"threshold", "period"},
        [&](const std::string& key, const YAML::Node& child_key,
            const YAML::Node& child) -> absl::Status {
          mark = child_key.Mark();
          if (key == "threshold") {
            return ParseDuration(child_key, child, KeyPath("irqoff", key), absl::Microseconds(500),
                                 absl::Seconds(10), irqoff.threshold);
          }
          return ParseDuration(child_key, child, KeyPath("irqoff", key), absl::Microseconds(250),
                               absl::Milliseconds(100), irqoff.period);
        });
    if (!status.ok()) return status;
    if (irqoff.threshold < 2 * irqoff.period) {
      return Error(mark.value_or(key_node.Mark()),
                   absl::StrCat("irqoff.threshold (", absl::FormatDuration(irqoff.threshold),
                                ") must be at least 2 x irqoff.period (",
                                absl::FormatDuration(irqoff.period), ")"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseSlab(const YAML::Node& key_node, const YAML::Node& value,
                         SlabConfig& slab) const {
    if (absl::Status status = CheckSection(key_node, value, "slab"); !status.ok()) return status;
    return ForEachKey(value, "slab", {"caches", "top_n", "interval", "max_read_time"},
                      [&](const std::string& key, const YAML::Node& child_key,
                          const YAML::Node& child) -> absl::Status {
                        const std::string path = KeyPath("slab", key);
                        if (key == "caches")
                          return ParseSlabCacheNames(child_key, child, path, slab.caches);
                        if (key == "top_n")
                          return ParseInt(child_key, child, path, 0, 1000, slab.top_n);
                        if (key == "interval") {
                          return ParseDuration(child_key, child, path, absl::Seconds(1),
                                               absl::Hours(24), slab.interval);
                        }
                        return ParseDuration(child_key, child, path, absl::Milliseconds(1),
                                             absl::Seconds(10), slab.max_read_time);
                      });
  }

  // Slab cache names as /sys/kernel/slab and /proc/slabinfo spell them ("dentry",
  // "kmalloc-rcl-64"): printable, no blank, no '/'; at most 100, each at most 64 characters.
  absl::Status ParseSlabCacheNames(const YAML::Node& key_node, const YAML::Node& value,
                                   absl::string_view path, std::vector<std::string>& out) const {
    if (!value.IsSequence()) {
      return Error(
          key_node.Mark(),
          absl::StrCat(path, ": expected a list of slab cache names, got ", Describe(value)));
    }
    if (value.size() > 100) {
      return Error(key_node.Mark(), absl::StrCat(path, ": at most 100 caches"));
    }
    std::vector<std::string> names;
    for (const YAML::Node& item : value) {
      const bool valid = item.IsScalar() && !item.Scalar().empty() && item.Scalar().size() <= 64 &&
                         item.Scalar() != "." && item.Scalar() != ".." &&
                         std::all_of(item.Scalar().begin(), item.Scalar().end(), [](char c) {
                           return absl::ascii_isgraph(static_cast<unsigned char>(c)) && c != '/';
                         });
      if (!valid) {
        return Error(item.Mark(),
                     absl::StrCat(path, ": expected a slab cache name, got ", Describe(item)));
      }
      if (std::find(names.begin(), names.end(), item.Scalar()) != names.end()) {
        return Error(item.Mark(),
                     absl::StrCat(path, ": \"", item.Scalar(), "\" is listed more than once"));
      }
      names.push_back(item.Scalar());
    }
    out = std::move(names);
    return absl::OkStatus();
  }

  absl::Status ParseMadvise(const YAML::Node& key_node, const YAML::Node& value,
                            Config& config) const {
    if (absl::Status status = CheckSection(key_node, value, "madvise"); !status.ok()) {
      return status;
    }
    return ForEachKey(value, "madvise", {"storm_calls_per_second"},
                      [&](const std::string& key, const YAML::Node& child_key,
                          const YAML::Node& child) -> absl::Status {
                        return ParseInt(child_key, child, KeyPath("madvise", key), 1, 100000000,
                                        config.madvise_storm_calls_per_second);
                      });
  }

  absl::Status ParseWeb(const YAML::Node& key_node, const YAML::Node& value,
                        WebServerConfig& web) const {
    if (absl::Status status = CheckSection(key_node, value, "web"); !status.ok()) return status;
    return ForEachKey(value, "web",
                      {"config_file", "max_connections", "request_timeout", "keep_alive_timeout"},
                      [&](const std::string& key, const YAML::Node& child_key,
                          const YAML::Node& child) -> absl::Status {
                        const std::string path = KeyPath("web", key);
                        if (key == "max_connections")
                          return ParseInt(child_key, child, path, 4, 1024, web.max_connections);
                        if (key == "request_timeout") {
                          return ParseDuration(child_key, child, path, absl::Milliseconds(100),
                                               absl::Minutes(5), web.request_timeout);
                        }
                        if (key == "keep_alive_timeout") {
                          return ParseDuration(child_key, child, path, absl::ZeroDuration(),
                                               absl::Minutes(10), web.keep_alive_timeout);
                        }
                        // Empty: no web configuration file.
                        if (child.IsNull() || (child.IsScalar() && child.Scalar().empty())) {
                          web.config_file.clear();
                          return absl::OkStatus();
                        }
                        return ParseAbsolutePath(child_key, child, path, web.config_file);
                      });
  }

  // The growth rate is a least-squares slope over the window, which needs at least 2 samples.
  absl::Status CheckGrowthWindow(const Config& config) const {
    const absl::Duration shortest = 2 * config.sampling_interval;
    if (config.percpu_growth_window >= shortest) return absl::OkStatus();
    const std::string numbers = absl::StrCat(
        "meminfo.percpu_growth_window (", absl::FormatDuration(config.percpu_growth_window),
        window_mark_ ? "" : ", the default", ") must be at least 2 x sampling_interval (",
        absl::FormatDuration(config.sampling_interval), interval_mark_ ? "" : ", the default",
        ") = ", absl::FormatDuration(shortest),
        ", so that the growth rate is fitted over at least 2 samples");
    // Point at the window when the file sets it, else at the interval that made it too short.
    const YAML::Mark mark =
        window_mark_ ? *window_mark_ : interval_mark_.value_or(YAML::Mark::null_mark());
    return Error(mark, numbers);
  }

  absl::Status ParseLabels(const YAML::Node& key_node, const YAML::Node& value,
                           LabelLimits& labels) const {
    if (absl::Status status = CheckSection(key_node, value, "labels"); !status.ok()) return status;
    return ForEachKey(
        value, "labels", {"comm", "caller", "unit"},
        [&](const std::string& key, const YAML::Node& child_key,
            const YAML::Node& child) -> absl::Status {
          int& limit = key == "comm" ? labels.comm : key == "caller" ? labels.caller : labels.unit;
          return ParseInt(child_key, child, KeyPath("labels", key), kMinLabelLimit, kMaxLabelLimit,
                          limit);
        });
  }

  absl::Status ParseBpf(const YAML::Node& key_node, const YAML::Node& value, Config& config) const {
    if (absl::Status status = CheckSection(key_node, value, "bpf"); !status.ok()) return status;
    return ForEachKey(value, "bpf", {"enabled"},
                      [&](const std::string& key, const YAML::Node& child_key,
                          const YAML::Node& child) -> absl::Status {
                        return ParseBool(child_key, child, KeyPath("bpf", key), config.bpf_enabled);
                      });
  }

  absl::Status ParseHooks(const YAML::Node& key_node, const YAML::Node& value,
                          HooksConfig& hooks) const {
    if (absl::Status status = CheckSection(key_node, value, "hooks"); !status.ok()) return status;
    std::optional<YAML::Mark> slice_mark;
    absl::Status status = ForEachKey(
        value, "hooks",
        {"enabled", "refresh_interval", "max_info_series", "top_programs", "bpf_stats",
         "bpf_stats_slice", "hot_functions"},
        [&](const std::string& key, const YAML::Node& child_key,
            const YAML::Node& child) -> absl::Status {
          const std::string path = KeyPath("hooks", key);
          if (key == "enabled") return ParseBool(child_key, child, path, hooks.enabled);
          if (key == "refresh_interval") {
            return ParseDuration(child_key, child, path, absl::Milliseconds(500), absl::Hours(1),
                                 hooks.refresh_interval);
          }
          if (key == "max_info_series") {
            return ParseInt(child_key, child, path, 1, kMaxLabelLimit, hooks.max_info_series);
          }
          if (key == "top_programs") {
            return ParseInt(child_key, child, path, 1, kMaxLabelLimit, hooks.top_programs);
          }
          if (key == "bpf_stats") {
            absl::StatusOr<std::string> text =
                Scalar(child_key, child, path, "off, always or sampled");
            if (!text.ok()) return text.status();
            std::optional<BpfStatsMode> mode = ParseBpfStatsMode(*text);
            if (!mode) {
              return Error(child_key.Mark(), absl::StrCat(path,
                                                          ": expected off, always or "
                                                          "sampled, got ",
                                                          Describe(child)));
            }
            hooks.bpf_stats = *mode;
            return absl::OkStatus();
          }
          if (key == "bpf_stats_slice") {
            slice_mark = child_key.Mark();
            return ParseDuration(child_key, child, path, absl::Milliseconds(10), absl::Hours(1),
                                 hooks.bpf_stats_slice);
          }
          return ParseNameList(child_key, child, path, hooks.hot_functions);
        });
    if (!status.ok()) return status;
    // The default slice follows a short refresh_interval; a slice the file sets is checked.
    if (!slice_mark && hooks.bpf_stats_slice >= hooks.refresh_interval) {
      hooks.bpf_stats_slice = hooks.refresh_interval / 5;
    }
    if (hooks.bpf_stats_slice >= hooks.refresh_interval) {
      return Error(
          slice_mark.value_or(key_node.Mark()),
          absl::StrCat("hooks.bpf_stats_slice (", absl::FormatDuration(hooks.bpf_stats_slice),
                       ") must be shorter than hooks.refresh_interval (",
                       absl::FormatDuration(hooks.refresh_interval), ")"));
    }
    return absl::OkStatus();
  }

  // A list of kernel function names or "category:event" tracepoints (may be empty).
  absl::Status ParseNameList(const YAML::Node& key_node, const YAML::Node& value,
                             absl::string_view path, std::vector<std::string>& out) const {
    if (!value.IsSequence()) {
      return Error(key_node.Mark(), absl::StrCat(path,
                                                 ": expected a list of function names or "
                                                 "category:event tracepoints, got ",
                                                 Describe(value)));
    }
    std::vector<std::string> names;
    for (const YAML::Node& item : value) {
      const bool valid = item.IsScalar() && !item.Scalar().empty() &&
                         std::all_of(item.Scalar().begin(), item.Scalar().end(), [](char c) {
                           return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                  c == ':' || c == '.';
                         });
      if (!valid) {
        return Error(item.Mark(), absl::StrCat(path,
                                               ": expected a function name or "
                                               "category:event, got ",
                                               Describe(item)));
      }
      names.push_back(item.Scalar());
    }
    out = std::move(names);
    return absl::OkStatus();
  }

  absl::Status ParseProbes(const YAML::Node& key_node, const YAML::Node& value,
                           Config& config) const {
    if (absl::Status status = CheckSection(key_node, value, "probes"); !status.ok()) {
      return status;
    }
    return ForEachKey(
        value, "probes", KnownProbeNames(),
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
    if (absl::Status status = CheckSection(name_node, settings, path); !status.ok()) return status;
    return ForEachKey(settings, path, {"enabled", "mechanisms"},
                      [&](const std::string& key, const YAML::Node& child_key,
                          const YAML::Node& child) -> absl::Status {
                        if (key == "enabled") {
                          return ParseBool(child_key, child, KeyPath(path, key), probe.enabled);
                        }
                        return ParseMechanisms(name, child_key, child, KeyPath(path, key),
                                               probe.mechanisms);
                      });
  }

  absl::Status ParseMechanisms(const std::string& probe, const YAML::Node& key_node,
                               const YAML::Node& value, absl::string_view path,
                               std::vector<Mechanism>& out) const {
    const std::vector<Mechanism>& supported = SupportedMechanisms(probe);
    const std::string expected =
        absl::StrCat("a non-empty list drawn from [", MechanismList(supported), "]");
    if (!value.IsSequence() || value.size() == 0) {
      return Error(key_node.Mark(),
                   absl::StrCat(path, ": expected ", expected, ", got ", Describe(value)));
    }
    std::vector<Mechanism> mechanisms;
    for (const YAML::Node& item : value) {
      if (!item.IsScalar()) {
        return Error(item.Mark(),
                     absl::StrCat(path, ": expected a mechanism name, got ", Describe(item)));
      }
      const std::optional<Mechanism> mechanism = ParseMechanism(item.Scalar());
      if (!mechanism) {
        return Error(item.Mark(),
                     absl::StrCat(path, ": unknown mechanism \"", item.Scalar(), "\" (", probe,
                                  " can use: ", MechanismList(supported), ")"));
      }
      if (std::find(supported.begin(), supported.end(), *mechanism) == supported.end()) {
        return Error(item.Mark(),
                     absl::StrCat(path, ": ", probe, " cannot attach through \"", item.Scalar(),
                                  "\" (it can use: ", MechanismList(supported), ")"));
      }
      if (std::find(mechanisms.begin(), mechanisms.end(), *mechanism) != mechanisms.end()) {
        return Error(item.Mark(),
                     absl::StrCat(path, ": \"", item.Scalar(), "\" is listed more than once"));
      }
      mechanisms.push_back(*mechanism);
    }
    out = std::move(mechanisms);
    return absl::OkStatus();
  }

  std::string source_;
  // Where the file sets these, to point the growth-window check at the line to change.
  std::optional<YAML::Mark> interval_mark_;
  std::optional<YAML::Mark> window_mark_;
};

}  // namespace

ProbeConfig Config::Probe(std::string_view name) const {
  const auto it = probes.find(name);
  ProbeConfig probe = it == probes.end() ? ProbeConfig{} : it->second;
  if (probe.mechanisms.empty()) probe.mechanisms = DefaultMechanisms(name);
  return probe;
}

const std::vector<std::string_view>& KnownProbeNames() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string_view>;
    for (const ProbeMechanisms& entry : ProbeTable()) out->push_back(entry.probe);
    return out;
  }();
  return *names;
}

const std::vector<Mechanism>& SupportedMechanisms(std::string_view probe) {
  static const auto* none = new std::vector<Mechanism>;
  for (const ProbeMechanisms& entry : ProbeTable()) {
    if (entry.probe == probe) return entry.mechanisms;
  }
  return *none;
}

const std::vector<Mechanism>& DefaultMechanisms(std::string_view probe) {
  for (const ProbeMechanisms& entry : ProbeTable()) {
    if (entry.probe == probe && !entry.defaults.empty()) return entry.defaults;
  }
  return SupportedMechanisms(probe);
}

namespace {
// Where a YAML text has content and where a second document starts (1-based lines; 0: none).
// yaml-cpp 0.7's LoadAll can loop forever, allocating, on some malformed input (found by the
// config fuzzer: ",sms: [kprobe]C"), so the text is loaded as one document with YAML::Load and
// a second document is found by its "---" or "..." marker line instead.
struct DocumentScan {
  int first_content_line = 0;
  int second_document_line = 0;
};

DocumentScan ScanDocuments(std::string_view text) {
  DocumentScan scan;
  bool ended = false;  // a "..." closed the first document
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, eol == std::string_view::npos ? text.npos : eol - pos);
    pos = eol == std::string_view::npos ? text.size() + 1 : eol + 1;
    ++line_no;
    std::string_view trimmed = line.substr(0, line.find('#'));
    while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back())))
      trimmed.remove_suffix(1);
    if (trimmed.empty() || trimmed.front() == '%') continue;
    bool start_marker = trimmed.starts_with("---");
    bool end_marker = trimmed.starts_with("...");
    if ((start_marker && scan.first_content_line) || (ended && !end_marker)) {
      scan.second_document_line = line_no;
      return scan;
    }
    if (end_marker) {
      ended = scan.first_content_line != 0;
      continue;
    }
    std::string_view rest = start_marker ? trimmed.substr(3) : trimmed;
    while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front())))
      rest.remove_prefix(1);
    if (!rest.empty() && rest != "~" && rest != "null" && !scan.first_content_line) {
      scan.first_content_line = line_no;
    }
  }
  return scan;
}
}  // namespace

absl::StatusOr<Config> ParseConfig(std::string_view yaml_text, std::string_view source) {
  ConfigParser parser(source);
  Config config;
  const DocumentScan scan = ScanDocuments(yaml_text);
  if (scan.second_document_line) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ":", scan.second_document_line,
                     ": expected one YAML document, found a second one starting here"));
  }
  try {
    const YAML::Node document = YAML::Load(std::string(yaml_text));
    if (document.IsNull()) {
      if (!scan.first_content_line) return config;  // empty, only comments, or "~"
      // Text that yaml-cpp reads as nothing at all is not a configuration.
      return absl::InvalidArgumentError(absl::StrCat(std::string(source), ":",
                                                     scan.first_content_line,
                                                     ": not YAML settings (the text does not "
                                                     "parse as a mapping)"));
    }
    if (absl::Status status = parser.Parse(document, config); !status.ok()) return status;
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null())
      return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": ", e.msg));
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ":", e.mark.line + 1, ": ", e.msg));
  }
  return config;
}

int SecondYamlDocumentLine(std::string_view text) {
  return ScanDocuments(text).second_document_line;
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadConfigFileText(path);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

absl::StatusOr<std::string> ReadConfigFileText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  }
  // Closes the descriptor on every return below.
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  // fstat on the opened descriptor, so the checked file is the one that is read.
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("stat ", path, ": ", std::strerror(errno)));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("read ", path, ": ", std::strerror(EISDIR)));
  }
  // Anyone who can write the file could point the daemon elsewhere or switch probes off.
  if (info.st_mode & S_IWOTH) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": refusing a world-writable config file (mode ", mode, "); chmod o-w it"));
  }

  std::string text;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(absl::StrCat("read ", path, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxConfigFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": larger than ", kMaxConfigFileBytes / 1024, " KiB; is this the config file?"));
    }
  }
  return text;
}

}  // namespace kpath
