// /-/healthy and /-/ready over real HTTP, on the real kpathd: healthy as soon as it serves, ready
// only once the first snapshot is published (the probes attached) and while the snapshot is
// fresh. The sampler is held up by stopping its thread alone with ptrace (PTRACE_INTERRUPT):
// civetweb's threads go on answering. (Basic auth and TLS on these endpoints: web_test.cpp.)
#include <dirent.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;
using Clock = std::chrono::steady_clock;

namespace {

std::optional<HttpResponse> Get(int port, const std::string& path) {
  return HttpGet(port, path, 3s);
}

// kpathd's sampler: the last thread it starts that keeps the process's name (civetweb names its
// own), not the main thread.
pid_t SamplerThread(pid_t pid) {
  pid_t sampler = -1;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    const pid_t tid = std::atoi(e->d_name);
    if (tid <= 0 || tid == pid) continue;
    std::string comm;
    std::getline(std::ifstream(dir + "/" + e->d_name + "/comm"), comm);
    if (comm == "kpathd" && tid > sampler) sampler = tid;
  }
  closedir(d);
  return sampler;
}

}  // namespace

TEST_CASE("/-/ready: 503 while starting, 200 once a snapshot is served, 503 when it goes stale",
          "[web][health]") {
  REQUIRE(IsRoot());
  // BPF probes on: attaching them takes long enough to see kpathd serve before it is ready.
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 1s\n"});
  std::optional<HttpResponse> starting;
  bool healthy_while_starting = false;
  std::optional<HttpResponse> ready;
  const auto deadline = Clock::now() + 30s;
  while (Clock::now() < deadline && !ready) {
    auto r = Get(kpathd.port(), "/-/ready");
    if (r && r->status == 503 && !starting) {
      starting = r;
      auto healthy = Get(kpathd.port(), "/-/healthy");
      healthy_while_starting = healthy && healthy->status == 200;
    }
    if (r && r->status == 200) ready = r;
    if (!ready) std::this_thread::sleep_for(2ms);
  }
  INFO(kpathd.Output());
  REQUIRE(starting);
  CHECK(starting->body ==
        "kpathd is not ready: starting: the probes are being attached, no snapshot served yet\n");
  CHECK(starting->headers.find("Content-Type: text/plain") != std::string::npos);
  CHECK(healthy_while_starting);
  REQUIRE(ready);
  CHECK(ready->body == "kpathd is ready.\n");
  auto scrape = kpathd.Scrape();
  REQUIRE(scrape);
  CHECK(MetricValue(*scrape, "kpath_last_sample_timestamp_seconds"));

  // Stop the sampler: the snapshot ages past max(3 x 1 s, 15 s).
  const pid_t sampler = SamplerThread(kpathd.pid());
  REQUIRE(sampler > 0);
  REQUIRE(ptrace(PTRACE_SEIZE, sampler, nullptr, nullptr) == 0);
  REQUIRE(ptrace(PTRACE_INTERRUPT, sampler, nullptr, nullptr) == 0);
  int status = 0;
  REQUIRE(waitpid(sampler, &status, __WALL) == sampler);
  const auto stuck = Clock::now();
  std::optional<HttpResponse> stale;
  while (Clock::now() < stuck + 30s) {
    auto r = Get(kpathd.port(), "/-/ready");
    if (r && r->status == 503) {
      stale = r;
      break;
    }
    std::this_thread::sleep_for(200ms);
  }
  const auto stale_after = Clock::now() - stuck;
  auto healthy = Get(kpathd.port(), "/-/healthy");
  // Scrapes still get the old snapshot: its timestamp is what KpathdSnapshotStale sees.
  auto old = kpathd.Scrape();
  ptrace(PTRACE_DETACH, sampler, nullptr, nullptr);
  REQUIRE(stale);
  CHECK(stale_after >= 12s);
  CHECK(stale->body.rfind("kpathd is not ready: the snapshot served is ", 0) == 0);
  CHECK(stale->body.find("old (stale after 15s): collection is stuck\n") != std::string::npos);
  REQUIRE(healthy);
  CHECK(healthy->status == 200);
  CHECK(old);

  // Resumed: ready again with the next collection.
  const auto resumed = Clock::now();
  bool again = false;
  while (!again && Clock::now() < resumed + 10s) {
    auto r = Get(kpathd.port(), "/-/ready");
    again = r && r->status == 200;
    if (!again) std::this_thread::sleep_for(100ms);
  }
  CHECK(again);
}
