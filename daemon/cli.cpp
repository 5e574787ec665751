#include "daemon/cli.h"

#include <filesystem>
#include <string_view>

#include "absl/strings/numbers.h"
#include "fmt/format.h"

namespace kpath {

std::string UsageText() {
  return R"(Usage:
  kpathd [--config FILE] [--listen HOST:PORT] [--procfs-root DIR] [--sysfs-root DIR]
         [--log-level LEVEL] [--web.config.file FILE]
  kpathd --check-config FILE
  kpathd --config FILE --reload PID [--timeout 30s]
  kpathd diagnose [--duration 30s] [--json] [--config FILE] [--log-level LEVEL]
                  [--url URL] [--ca-file FILE | --insecure] [--cert FILE --key FILE]
                  [--user USER:PASSWORD | --netrc-file FILE]
  kpathd events [--url URL] [--since SINCE] [--kind KIND] [--follow] [--json] [--config FILE]
                [--ca-file FILE | --insecure] [--cert FILE --key FILE]
                [--user USER:PASSWORD | --netrc-file FILE]
  kpathd --version

kpathd keeps eBPF probes attached and samples /proc to catch kernel pathologies (percpu memory
growth, cgroup churn, long IRQ-off regions, foreign kernel hooks, madvise storms) and serves them
as Prometheus metrics on http://HOST:PORT/metrics.

Options:
  --config FILE        YAML configuration (default: built-in defaults, the same as the shipped
                       /etc/kpathd/kpathd.yaml). SIGHUP reloads it.
  --listen HOST:PORT   address for /metrics (default 0.0.0.0:9477)
  --procfs-root DIR    read /proc from DIR (testing, containers)
  --sysfs-root DIR     read /sys from DIR
  --log-level LEVEL    trace, debug, info, warn, error, critical, off (default info)
  --web.config.file FILE
                       TLS and basic authentication for /metrics, in the Prometheus
                       exporter-toolkit web configuration format (overrides
                       web.config_file). SIGHUP re-reads it.
  --check-config FILE  validate FILE and exit: 0 if valid, 1 with file:line: reason if not
  --reload PID         validate the --config FILE, have the kpathd PID reload it, and wait
                       (--timeout, default 30s) until the new configuration is in force: exit
                       0 then, 1 if FILE is invalid (file:line: reason), kpathd refused it or
                       did not answer in time. The unit's ExecReload= (systemctl reload kpathd).
  diagnose             attach every probe, watch for --duration (default 30s; 1s to 1h), then
                       print what was found, pathology by pathology, with the evidence and the
                       fix (--json: the same as JSON). The IRQ-off regions of the last hour
                       and the hook events come from the running kpathd's /events, reached
                       as `kpathd events` reaches it (the same --url, --ca-file, --insecure,
                       --cert/--key, --user and --netrc-file); without one, from the watch.
                       Exit 0: nothing found, 1: something found, 2: error.
  events               print the events of a running kpathd (IRQ-off regions, foreign hooks
                       appearing and leaving, madvise storms, cgroup churn bursts;
                       docs/events.md), oldest first, from its /events:
                       --url (default: the listen_address of --config, else of
                       /etc/kpathd/kpathd.yaml when readable, else 127.0.0.1:9477; https
                       when its web configuration has TLS; https://HOST:PORT for TLS;
                       http://USER:PASSWORD@HOST:PORT for basic auth);
                       https: --ca-file FILE the CA (PEM) to verify kpathd's certificate with
                       (default: kpathd's own certificate from its web configuration without
                       --url, else the system's CAs), --insecure (-k) not to verify it,
                       --cert FILE --key FILE a client certificate (PEM) for a server that
                       asks for one; basic auth: --user USER:PASSWORD, or --netrc-file FILE
                       (curl's netrc: "machine HOST login USER password PASSWORD");
                       --since a sequence number (42), an RFC 3339 time
                       (2026-12-03T07:00:00Z), Unix seconds (@1796281200) or a duration back
                       from now (1h); --kind irqoff_region, hook_appeared, hook_left,
                       madvise_storm_start, madvise_storm_end, cgroup_churn_burst_start or
                       cgroup_churn_burst_end;
                       --follow: keep printing new events until interrupted; --json: one JSON
                       object a line. Exit 0, or 1 when kpathd cannot be reached.
  --version            print version and exit
  --help               this text
)";
}

absl::StatusOr<CliOptions> ParseCommandLine(const std::vector<std::string>& args) {
  CliOptions o;
  size_t first = 1;
  if (args.size() > 1 && args[1] == "diagnose") {
    o.mode = CliOptions::Mode::kDiagnose;
    first = 2;
  } else if (args.size() > 1 && args[1] == "events") {
    o.mode = CliOptions::Mode::kEvents;
    first = 2;
  }
  const bool events = o.mode == CliOptions::Mode::kEvents;
  // The options of a client of a running kpathd's /events: `kpathd events`, and `kpathd diagnose`
  // for that kpathd's IRQ-off regions and hook events (daemon/events/events_client.h).
  const bool client = events || o.mode == CliOptions::Mode::kDiagnose;
  bool timeout_given = false;
  for (size_t i = first; i < args.size(); ++i) {
    std::string_view arg = args[i];
    std::string_view name = arg;
    std::optional<std::string> inline_value;
    if (size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      inline_value = std::string(arg.substr(eq + 1));
    }
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(fmt::format("{} needs a value", name));
      return args[++i];
    };
    auto take = [&](std::optional<std::string>& field) -> absl::Status {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      if (v->empty()) return absl::InvalidArgumentError(fmt::format("{} needs a value", name));
      field = *v;
      return absl::OkStatus();
    };
    absl::Status s;
    if (name == "--config") {
      s = take(o.config_path);
    } else if (name == "--listen") {
      s = take(o.listen_address);
    } else if (name == "--procfs-root") {
      s = take(o.procfs_root);
    } else if (name == "--sysfs-root") {
      s = take(o.sysfs_root);
    } else if (name == "--log-level") {
      s = take(o.log_level);
    } else if (name == "--web.config.file") {
      s = take(o.web_config_file);
      // Relative to the directory kpathd was started in, as the flag's user means it.
      if (s.ok()) o.web_config_file = std::filesystem::absolute(*o.web_config_file).string();
    } else if (name == "--check-config") {
      o.mode = CliOptions::Mode::kCheckConfig;
      s = take(o.config_path);
    } else if (name == "--reload" && o.mode == CliOptions::Mode::kRun) {
      o.mode = CliOptions::Mode::kReload;
      std::optional<std::string> text;
      s = take(text);
      int pid = 0;
      if (s.ok() && (!absl::SimpleAtoi(*text, &pid) || pid <= 0)) {
        s = absl::InvalidArgumentError(
            fmt::format("--reload \"{}\": the pid of the running kpathd ($MAINPID)", *text));
      }
      o.reload_pid = pid;
    } else if (name == "--timeout") {
      std::optional<std::string> text;
      s = take(text);
      if (s.ok() && (!absl::ParseDuration(*text, &o.reload_timeout) ||
                     o.reload_timeout < absl::Seconds(1) || o.reload_timeout > absl::Hours(1))) {
        s = absl::InvalidArgumentError(
            fmt::format("--timeout \"{}\": a duration from 1s to 1h, such as 30s", *text));
      }
      timeout_given = true;
    } else if (name == "--duration" && o.mode == CliOptions::Mode::kDiagnose) {
      std::optional<std::string> text;
      s = take(text);
      if (s.ok() &&
          (!absl::ParseDuration(*text, &o.diagnose_duration) ||
           o.diagnose_duration < absl::Seconds(1) || o.diagnose_duration > absl::Hours(1))) {
        s = absl::InvalidArgumentError(
            fmt::format("--duration \"{}\": a duration from 1s to 1h, such as 30s or 2m", *text));
      }
    } else if (name == "--json" && o.mode == CliOptions::Mode::kDiagnose && !inline_value) {
      o.diagnose_json = true;
    } else if (name == "--json" && events && !inline_value) {
      o.events_json = true;
    } else if (name == "--follow" && events && !inline_value) {
      o.events_follow = true;
    } else if (name == "--url" && client) {
      s = take(o.events_url);
    } else if (name == "--since" && events) {
      s = take(o.events_since);
    } else if (name == "--kind" && events) {
      s = take(o.events_kind);
    } else if (name == "--ca-file" && client) {
      s = take(o.events_ca_file);
    } else if (name == "--cert" && client) {
      s = take(o.events_cert);
    } else if (name == "--key" && client) {
      s = take(o.events_key);
    } else if ((name == "--insecure" || name == "-k") && client && !inline_value) {
      o.events_insecure = true;
    } else if (name == "--user" && client) {
      s = take(o.events_user);
    } else if (name == "--netrc-file" && client) {
      s = take(o.events_netrc_file);
    } else if (name == "--version" && !inline_value) {
      o.mode = CliOptions::Mode::kVersion;
    } else if ((name == "--help" || name == "-h") && !inline_value) {
      o.mode = CliOptions::Mode::kHelp;
    } else {
      return absl::InvalidArgumentError(fmt::format("unknown argument \"{}\"", arg));
    }
    if (!s.ok()) return s;
  }
  if (o.mode == CliOptions::Mode::kReload && !o.config_path) {
    return absl::InvalidArgumentError("--reload needs --config FILE: the file to reload");
  }
  if (client && o.events_cert.has_value() != o.events_key.has_value()) {
    return absl::InvalidArgumentError(
        "--cert and --key go together (a client certificate and its key)");
  }
  if (client && o.events_insecure && o.events_ca_file) {
    return absl::InvalidArgumentError("--insecure and --ca-file: pick one");
  }
  if (timeout_given && o.mode != CliOptions::Mode::kReload) {
    return absl::InvalidArgumentError("--timeout goes with --reload");
  }
  return o;
}

absl::Status ApplyCommandLine(const CliOptions& o, Config& config) {
  // Validate flag values exactly as the file's: render them as YAML and parse.
  std::string yaml;
  auto quoted = [](const std::string& v) {
    std::string q = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
    return q + "\"";
  };
  if (o.listen_address) yaml += fmt::format("listen_address: {}\n", quoted(*o.listen_address));
  if (o.log_level) yaml += fmt::format("log_level: {}\n", quoted(*o.log_level));
  if (o.procfs_root || o.sysfs_root) {
    yaml += fmt::format("paths:\n");
    if (o.procfs_root) yaml += fmt::format("  procfs: {}\n", quoted(*o.procfs_root));
    if (o.sysfs_root) yaml += fmt::format("  sysfs: {}\n", quoted(*o.sysfs_root));
  }
  if (o.web_config_file) {
    yaml += fmt::format("web:\n  config_file: {}\n", quoted(*o.web_config_file));
  }
  if (yaml.empty()) return absl::OkStatus();
  absl::StatusOr<Config> flags = ParseConfig(yaml, "command line");
  if (!flags.ok()) return flags.status();
  if (o.listen_address) config.listen_address = flags->listen_address;
  if (o.log_level) config.log_level = flags->log_level;
  if (o.procfs_root) config.procfs_root = flags->procfs_root;
  if (o.sysfs_root) config.sysfs_root = flags->sysfs_root;
  if (o.web_config_file) config.web.config_file = flags->web.config_file;
  return absl::OkStatus();
}

}  // namespace kpath
