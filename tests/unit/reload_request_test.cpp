// The reload client's command line, and which SIGHUPs the daemon answers (the signals themselves
// travel between real processes in tests/integration/reload_test.cpp).
#include "daemon/reload_request.h"

#include <signal.h>

#include <catch2/catch.hpp>

#include "daemon/cli.h"

using namespace kpath;

namespace {

absl::StatusOr<CliOptions> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "kpathd");
  return ParseCommandLine(args);
}

siginfo_t Queued(int sig, int value) {
  siginfo_t info{};
  info.si_signo = sig;
  info.si_code = SI_QUEUE;
  info.si_value.sival_int = value;
  return info;
}

}  // namespace

TEST_CASE("command line: --reload PID with --config, and its timeout", "[cli][reload]") {
  auto o = Parse({"--config", "/etc/kpathd/kpathd.yaml", "--reload", "4242"});
  REQUIRE(o.ok());
  CHECK(o->mode == CliOptions::Mode::kReload);
  CHECK(o->reload_pid == 4242);
  CHECK(o->config_path == "/etc/kpathd/kpathd.yaml");
  CHECK(o->reload_timeout == absl::Seconds(30));
  o = Parse({"--reload=7", "--config=/k.yaml", "--timeout", "2s"});
  REQUIRE(o.ok());
  CHECK(o->reload_timeout == absl::Seconds(2));

  // $MAINPID empty (the unit not running) or not a pid.
  for (const char* bad : {"", "0", "-1", "12x", "abc"}) {
    INFO("--reload \"" << bad << "\"");
    CHECK_FALSE(Parse({"--config", "/k.yaml", "--reload", bad}).ok());
  }
  CHECK(Parse({"--reload", "7"}).status().message() ==
        "--reload needs --config FILE: the file to reload");
  CHECK_FALSE(Parse({"--config", "/k.yaml", "--reload", "7", "--timeout", "0s"}).ok());
  CHECK_FALSE(Parse({"--config", "/k.yaml", "--reload", "7", "--timeout", "forever"}).ok());
  CHECK(Parse({"--config", "/k.yaml", "--timeout", "5s"}).status().message() ==
        "--timeout goes with --reload");
}

TEST_CASE("only a SIGHUP queued with the reload value asks for an answer", "[reload]") {
  CHECK(IsReloadRequest(Queued(SIGHUP, kReloadRequestValue)));
  // kill -HUP: its sender expects no signal back.
  siginfo_t kill_hup{};
  kill_hup.si_signo = SIGHUP;
  kill_hup.si_code = SI_USER;
  CHECK_FALSE(IsReloadRequest(kill_hup));
  // sigqueue by someone else, with another value; the answer value on another signal.
  CHECK_FALSE(IsReloadRequest(Queued(SIGHUP, 1)));
  CHECK_FALSE(IsReloadRequest(Queued(SIGTERM, kReloadRequestValue)));
  siginfo_t from_kernel = Queued(SIGHUP, kReloadRequestValue);
  from_kernel.si_code = SI_KERNEL;  // a hangup of a controlling terminal
  CHECK_FALSE(IsReloadRequest(from_kernel));
}
