// kpathd's command line.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/config.h"

namespace kpath {

struct CliOptions {
  enum class Mode { kRun, kCheckConfig, kReload, kVersion, kHelp, kDiagnose, kEvents };
  Mode mode = Mode::kRun;
  // `kpathd diagnose [--duration D] [--json]`: watch for D, print a report, exit.
  absl::Duration diagnose_duration = absl::Seconds(30);
  bool diagnose_json = false;
  // `kpathd events [--url URL] [--since S] [--kind K] [--follow] [--json]`: print a running
  // kpathd's events (daemon/events/events_client.h).
  std::optional<std::string> events_url;
  std::optional<std::string> events_since;
  std::optional<std::string> events_kind;
  bool events_follow = false;
  bool events_json = false;
  // https: --ca-file (trust), --insecure (no verification), --cert/--key (a client certificate
  // for a server that asks); basic auth: --user USER:PASSWORD or --netrc-file FILE. Also taken by
  // `kpathd diagnose`, which reads the running kpathd's events the same way.
  std::optional<std::string> events_ca_file;
  std::optional<std::string> events_cert;
  std::optional<std::string> events_key;
  bool events_insecure = false;
  std::optional<std::string> events_user;
  std::optional<std::string> events_netrc_file;
  // Any of the client options above (--url and the https and basic-auth ones) given.
  bool EventsClientOptionsGiven() const {
    return events_url || events_ca_file || events_cert || events_key || events_insecure ||
           events_user || events_netrc_file;
  }
  // `kpathd --config FILE --reload PID [--timeout 30s]`: check FILE, have the kpathd PID reload
  // it, wait for its answer (daemon/reload_request.h).
  pid_t reload_pid = 0;
  absl::Duration reload_timeout = absl::Seconds(30);
  std::optional<std::string> config_path;  // --config, or the file of --check-config
  // Flags that override the configuration file (and stay in force across SIGHUP reloads).
  std::optional<std::string> listen_address;
  std::optional<std::string> procfs_root;
  std::optional<std::string> sysfs_root;
  std::optional<std::string> log_level;
  std::optional<std::string> web_config_file;  // --web.config.file, made absolute
};

absl::StatusOr<CliOptions> ParseCommandLine(const std::vector<std::string>& args);
std::string UsageText();
// Applies the flags over a configuration loaded from file (or the defaults), validating them
// like the file's values.
absl::Status ApplyCommandLine(const CliOptions& options, Config& config);

}  // namespace kpath
