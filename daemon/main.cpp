// kpathd: see README.md. Fatal errors end here, with a message and a non-zero exit.
#include <bpf/libbpf.h>

#include <cstdio>
#include <string>
#include <vector>

#include "daemon/build_info.h"
#include "daemon/cli.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/diagnose.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
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
    case kpath::CliOptions::Mode::kCheckConfig: {
      absl::StatusOr<kpath::Config> config = kpath::LoadConfigFile(*cli->config_path);
      if (!config.ok()) {
        std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
        return 1;
      }
      std::printf("%s: valid\n", cli->config_path->c_str());
      return 0;
    }
    case kpath::CliOptions::Mode::kRun:
    case kpath::CliOptions::Mode::kDiagnose:
      break;
  }

  kpath::Config config;
  if (cli->config_path) {
    absl::StatusOr<kpath::Config> loaded = kpath::LoadConfigFile(*cli->config_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "kpathd: %s\n", std::string(loaded.status().message()).c_str());
      return 2;
    }
    config = *std::move(loaded);
  }
  if (absl::Status s = kpath::ApplyCommandLine(*cli, config); !s.ok()) {
    std::fprintf(stderr, "kpathd: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (absl::Status s = kpath::ConfigureLogging(config.log_level); !s.ok()) {
    std::fprintf(stderr, "kpathd: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  kpath::BlockDaemonSignals();
  if (cli->mode == kpath::CliOptions::Mode::kDiagnose) {
    return kpath::RunDiagnose(*cli, std::move(config));
  }
  spdlog::info("kpathd {} (revision {}) starting", kpath::kVersion, kpath::kRevision);
  kpath::Daemon daemon(*std::move(cli), std::move(config));
  return daemon.Run();
}
