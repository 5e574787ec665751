// kpathd: see README.md. Fatal errors end here, with a message and a non-zero exit.
#include <bpf/libbpf.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/build_info.h"
#include "daemon/cli.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/diagnose.h"
#include "daemon/events/daemon_endpoint.h"
#include "daemon/events/events_client.h"
#include "daemon/log_format.h"
#include "daemon/reload_request.h"
#include "daemon/web/metrics_server.h"
#include "spdlog/spdlog.h"

namespace {

// --check-config: the file, and the web configuration file it names with its certificates and
// hashes.
absl::Status CheckConfigFile(const std::string& path) {
  absl::StatusOr<kpath::Config> config = kpath::LoadConfigFile(path);
  if (!config.ok()) return config.status();
  if (absl::StatusOr<kpath::WebSecurity> web = kpath::LoadWebSecurity(config->web); !web.ok()) {
    return web.status();
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  // Resident memory (bench/README.md, "Serving"). glibc raises its mmap threshold to the largest
  // block freed (up to 32 MiB), so once start-up has freed its large blocks (libbpf's vmlinux
  // BTF, the kallsyms text) ~30 MB of freed heap stayed resident for good: a fixed threshold
  // keeps large blocks in their own mappings, given back on free. And each civetweb thread that
  // served a scrape got an arena of its own holding that scrape's freed blocks (+95 MB after 60
  // scrapes of 23k series): scrapes are short and rarely concurrent, so one arena is enough.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_ARENA_MAX, 1);
  std::vector<std::string> args(argv, argv + argc);
  absl::StatusOr<kpath::CliOptions> cli = kpath::ParseCommandLine(args);
  if (!cli.ok()) {
    std::fprintf(stderr, "kpathd: %s\n\n%s", std::string(cli.status().message()).c_str(),
                 kpath::UsageText().c_str());
    return 2;
  }
  switch (cli->mode) {
    case kpath::CliOptions::Mode::kHelp:
      std::fputs(kpath::UsageText().c_str(), stdout);
      return 0;
    case kpath::CliOptions::Mode::kVersion:
      std::printf("kpathd %s (revision %s, libbpf %u.%u)\n", kpath::kVersion, kpath::kRevision,
                  libbpf_major_version(), libbpf_minor_version());
      return 0;
    case kpath::CliOptions::Mode::kCheckConfig:
      if (absl::Status s = CheckConfigFile(*cli->config_path); !s.ok()) {
        kpath::PrintError(std::string(s.message()));
        return 1;
      }
      std::printf("%s: valid\n", cli->config_path->c_str());
      return 0;
    case kpath::CliOptions::Mode::kReload: {
      // A file that does not validate never reaches the daemon: its error is this command's
      // (systemctl reload fails, and the journal names file and line).
      absl::Status s = CheckConfigFile(*cli->config_path);
      if (s.ok()) s = kpath::RequestReload(cli->reload_pid, cli->reload_timeout);
      if (!s.ok()) {
        kpath::PrintError(absl::StrCat("kpathd --reload: ", s.message()));
        return 1;
      }
      std::printf("kpathd (pid %d): configuration from %s in force\n", cli->reload_pid,
                  cli->config_path->c_str());
      return 0;
    }
    case kpath::CliOptions::Mode::kRun:
    case kpath::CliOptions::Mode::kDiagnose:
    case kpath::CliOptions::Mode::kEvents:
      break;
  }

  kpath::Config config;
  std::optional<std::string> config_path = cli->config_path;
  if (!config_path && cli->mode == kpath::CliOptions::Mode::kEvents &&
      access(kpath::kServiceConfigFile, R_OK) == 0) {
    config_path = kpath::kServiceConfigFile;
  }
  if (config_path) {
    absl::StatusOr<kpath::Config> loaded = kpath::LoadConfigFile(*config_path);
    if (!loaded.ok()) {
      kpath::PrintError(absl::StrCat("kpathd: ", loaded.status().message()));
      return 2;
    }
    config = *std::move(loaded);
  }
  if (absl::Status s = kpath::ApplyCommandLine(*cli, config); !s.ok()) {
    kpath::PrintError(absl::StrCat("kpathd: ", s.message()));
    return 2;
  }
  if (absl::Status s = kpath::ConfigureLogging(config.log_level); !s.ok()) {
    kpath::PrintError(absl::StrCat("kpathd: ", s.message()));
    return 2;
  }
  if (cli->mode == kpath::CliOptions::Mode::kEvents) {
    return kpath::RunEventsCommand(*cli, config);
  }
  kpath::BlockDaemonSignals();
  if (cli->mode == kpath::CliOptions::Mode::kDiagnose) {
    return kpath::RunDiagnose(*cli, std::move(config));
  }
  spdlog::info("kpathd {} (revision {}) starting", kpath::kVersion, kpath::kRevision);
  kpath::Daemon daemon(*std::move(cli), std::move(config));
  return daemon.Run();
}
