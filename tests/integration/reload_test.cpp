// `systemctl reload kpathd` as the unit runs it (ExecReload=kpathd --config FILE --reload
// $MAINPID), between real processes: the client returns once the daemon has the new
// configuration in force, fails when the file is bad or the daemon refuses it, and a plain
// kill -HUP still reloads without an answer.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <string>

#include "support/kpathd_process.h"
#include "support/temp_dir.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

CommandResult ReloadClient(const std::string& config, pid_t daemon, const std::string& more = "") {
  return RunCommand(KpathdBinary() + " --config " + config + " --reload " + std::to_string(daemon) +
                    more);
}

}  // namespace

TEST_CASE("kpathd --reload returns 0 only once the new configuration is in force",
          "[daemon][reload][systemd]") {
  REQUIRE(IsRoot());
  NotifySocket notify;
  KpathdProcess kpathd(
      {.env = {{"NOTIFY_SOCKET", notify.path()}}, .config_yaml = "sampling_interval: 10s\n"});
  REQUIRE(notify.WaitFor("READY=1", 20s));
  notify.Drain();

  kpathd.RewriteConfig("sampling_interval: 200ms\n");
  CommandResult r = ReloadClient(kpathd.config_path(), kpathd.pid());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("configuration from " + kpathd.config_path().string() + " in force") !=
        std::string::npos);
  // By the time the client returned, the sampler had applied it and told systemd so: RELOADING=1
  // then READY=1 are already on the socket.
  const std::string sent = notify.Drain();
  INFO(sent);
  const size_t reloading = sent.find("RELOADING=1");
  REQUIRE(reloading != std::string::npos);
  CHECK(sent.find("READY=1", reloading) != std::string::npos);
  CHECK(kpathd.Output().find("SIGHUP: configuration reloaded") != std::string::npos);
  // The 200 ms interval is the one in force: STATUS= several times a second.
  CHECK(notify.CountFor(std::regex(R"(STATUS=\d+/\d+ probes attached)"), 2s) >= 4);
  CHECK(kpathd.Running());
}

TEST_CASE(
    "kpathd --reload refuses a bad file itself, naming file and line, and the daemon "
    "is not disturbed",
    "[daemon][reload][bad-input]") {
  REQUIRE(IsRoot());
  NotifySocket notify;
  KpathdProcess kpathd(
      {.env = {{"NOTIFY_SOCKET", notify.path()}}, .config_yaml = "sampling_interval: 10s\n"});
  REQUIRE(notify.WaitFor("READY=1", 20s));
  kpathd.RewriteConfig("sampling_interval: 10s\nno_such_key: 1\n");
  CommandResult r = ReloadClient(kpathd.config_path(), kpathd.pid());
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find(kpathd.config_path().string() + ":2: unknown key \"no_such_key\"") !=
        std::string::npos);
  CHECK_FALSE(notify.WaitFor("RELOADING=1", 500ms));
  CHECK(kpathd.Output().find("SIGHUP") == std::string::npos);
  CHECK(kpathd.Running());
}

TEST_CASE("kpathd --reload exits 1 when the daemon refuses the configuration",
          "[daemon][reload][bad-input]") {
  REQUIRE(IsRoot());
  // The daemon's own --web.config.file, which the client does not know of, breaks.
  TempDir dir;
  const std::string web = dir / "web.yml";
  std::ofstream(web) << "tls_server_config:\n";
  KpathdProcess kpathd(
      {.args = {"--web.config.file", web}, .config_yaml = "sampling_interval: 10s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  std::ofstream(web) << "tls_server_config: [\n";
  CommandResult r = ReloadClient(kpathd.config_path(), kpathd.pid());
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("refused the configuration") != std::string::npos);
  CHECK(kpathd.WaitForOutput("SIGHUP: configuration refused"));
  CHECK(kpathd.Scrape());
}

TEST_CASE("a plain kill -HUP reloads and gets no signal back", "[daemon][reload][signals]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 10s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  kpathd.RewriteConfig("sampling_interval: 5s\n");
  // A SIGUSR1 or SIGUSR2 back would kill this shell (exit 138 or 140).
  CommandResult r =
      RunCommand("kill -HUP " + std::to_string(kpathd.pid()) + " && sleep 1 && echo alive");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output == "alive\n");
  CHECK(kpathd.WaitForOutput("SIGHUP: configuration reloaded"));
}

TEST_CASE("kpathd --reload gives up on a process that does not answer, and on one that is gone",
          "[daemon][reload][bad-input]") {
  TempDir dir;
  const std::string config = dir / "kpathd.yaml";
  std::ofstream(config) << "sampling_interval: 10s\n";
  // Not kpathd: it ignores SIGHUP and never answers.
  const pid_t mute = fork();
  REQUIRE(mute >= 0);
  if (mute == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // gone with the test, whatever happens
    signal(SIGHUP, SIG_IGN);
    for (;;) pause();
  }
  const auto begin = std::chrono::steady_clock::now();
  CommandResult r = ReloadClient(config, mute, " --timeout 1s");
  const auto took = std::chrono::steady_clock::now() - begin;
  kill(mute, SIGKILL);
  waitpid(mute, nullptr, 0);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("did not answer the reload within 1s") != std::string::npos);
  CHECK(took < 10s);

  // `mute` is reaped: nothing runs under that pid (the kernel does not reuse it so soon).
  r = ReloadClient(config, mute);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("is not running") != std::string::npos);
}
