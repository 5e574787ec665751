// IRQ-disabled regions on the real kernel: the real kpathd binary, real regions made by a BPF
// program of the tests (tests/integration/irqoff_fixture), scraped over HTTP.
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "irqoff_fixture.h"
#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

constexpr const char* kFixtureThread = "kpath-irqoff-fx";

// Sum of every sample of `name` whose labels include `labels`.
double SumOf(const std::string& exposition, const std::string& name,
             const std::map<std::string, std::string>& labels = {}) {
  std::istringstream in(exposition);
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.rfind(name, 0) != 0) continue;
    char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    bool match = std::all_of(labels.begin(), labels.end(), [&](const auto& kv) {
      return line.find(kv.first + "=\"" + kv.second + "\"") != std::string::npos;
    });
    if (match) sum += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return sum;
}

// The culprit label of the first kpath_irqoff_regions_total series of `comm`.
std::string CulpritOf(const std::string& exposition, const std::string& comm) {
  std::smatch m;
  std::regex re("kpath_irqoff_regions_total\\{comm=\"" + comm + "\",culprit=\"([^\"]+)\"\\}");
  return std::regex_search(exposition, m, re) ? m[1].str() : "";
}

// The region lengths (ms) kpathd logged at debug level for `comm`.
std::vector<double> LoggedLengths(const std::string& log, const std::string& comm) {
  std::vector<double> lengths;
  std::regex re("irqoff: region ([0-9.]+) ms on CPU [0-9]+ in " + comm + " ");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    lengths.push_back(std::stod((*it)[1].str()));
  }
  return lengths;
}

int LastCpu() {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n - 1 : 0;
}

std::string Config(const std::string& extra = "") { return "sampling_interval: 300ms\n" + extra; }

}  // namespace

TEST_CASE("a real 30 ms IRQ-off region is counted once with its length, process and culprit",
          "[irqoff]") {
  REQUIRE(IsRoot());
  std::string why;
  std::unique_ptr<IrqOffFixture> fixture = IrqOffFixture::Load(&why);
  if (!fixture) {
    WARN("skipped: " << why);
    return;
  }
  NotifySocket notify;
  KpathdProcess kpathd({.args = {"--log-level", "debug"},
                        .env = {{"NOTIFY_SOCKET", notify.path()}},
                        .config_yaml = Config()});
  REQUIRE(kpathd.WaitUntilServing());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  INFO(kpathd.Output());
  REQUIRE(MetricValue(*body, "kpath_probe_attached", {{"probe", "irqoff"}}) == 1);
  REQUIRE(SumOf(*body, "kpath_irqoff_regions_total", {{"comm", kFixtureThread}}) == 0);

  // Scrape all along, to see every sample's maximum.
  std::atomic<bool> done{false};
  double max_seen = 0;
  std::thread scraper([&] {
    while (!done) {
      if (auto b = kpathd.Scrape()) {
        max_seen = std::max(max_seen, MetricValue(*b, "kpath_irqoff_max_seconds").value_or(0));
      }
      std::this_thread::sleep_for(100ms);
    }
  });
  constexpr int kRegions = 5;
  std::vector<std::chrono::nanoseconds> held =
      fixture->HoldIrqsOff(LastCpu(), 30ms, kRegions, 150ms, kFixtureThread);
  std::this_thread::sleep_for(900ms);  // two samples
  done = true;
  scraper.join();
  REQUIRE(held.size() == kRegions);

  body = kpathd.Scrape();
  REQUIRE(body);
  std::string log = kpathd.Output();
  INFO(log);
  INFO(*body);
  // One region per hold, attributed to the thread that held IRQs off. The software timer may
  // miss the thread at the very edge of a region (a tick delivered late by the hypervisor just
  // before the hold began): allow one such miss.
  double counted = SumOf(*body, "kpath_irqoff_regions_total", {{"comm", kFixtureThread}});
  CHECK(counted >= kRegions - 1);
  CHECK(counted <= kRegions);
  // Each length within 25 % of what the fixture measured in the kernel.
  std::vector<double> lengths = LoggedLengths(log, kFixtureThread);
  CHECK(lengths.size() == static_cast<size_t>(counted));
  for (size_t i = 0; i < lengths.size(); ++i) {
    double actual =
        std::chrono::duration<double, std::milli>(held[std::min(i, held.size() - 1)]).count();
    INFO("logged " << lengths[i] << " ms, held " << actual << " ms");
    CHECK(std::abs(lengths[i] - actual) <= 0.25 * actual);
  }
  CHECK(max_seen >= 0.75 * 0.030);
  CHECK(max_seen <= 1.25 * 0.030 + 0.010);  // or another region of the host, not much longer
  // The histogram has them between 25 and 50 ms (or just below 25 ms).
  double in_range = SumOf(*body, "kpath_irqoff_seconds_bucket", {{"le", "0.05"}}) -
                    SumOf(*body, "kpath_irqoff_seconds_bucket", {{"le", "0.0025"}});
  CHECK(in_range >= counted);
  // A culprit label: the function that held IRQs off where the late tick shows it, "unknown"
  // where it cannot (delivered to user code, as hypervisors that inject a pending timer
  // only at the next exit do).
  std::string culprit = CulpritOf(*body, kFixtureThread);
  CHECK_FALSE(culprit.empty());
  if (culprit == "unknown") {
    WARN(
        "culprit of the fixture's regions: unknown (the late tick did not land in kernel code "
        "of the fixture's thread on this machine)");
  }
  // The log and the STATUS line name the longest region, its process and culprit.
  CHECK(log.find("longest ") != std::string::npos);
  CHECK(std::regex_search(
      log, std::regex("longest [0-9.]+ ms on CPU [0-9]+ in " + std::string(kFixtureThread))));
  bool status_named = false;
  while (auto datagram = notify.Receive(200ms)) {
    if (datagram->find("IRQs off") != std::string::npos &&
        datagram->find(kFixtureThread) != std::string::npos) {
      status_named = true;
    }
  }
  CHECK(status_named);
}

TEST_CASE("an idle host stays quiet at the default threshold", "[irqoff]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = Config()});
  REQUIRE(kpathd.WaitUntilServing());
  auto before = kpathd.Scrape();
  REQUIRE(before);
  REQUIRE(MetricValue(*before, "kpath_probe_attached", {{"probe", "irqoff"}}) == 1);
  std::this_thread::sleep_for(8s);
  auto after = kpathd.Scrape();
  REQUIRE(after);
  INFO(kpathd.Output());
  CHECK(SumOf(*after, "kpath_irqoff_regions_total") -
            SumOf(*before, "kpath_irqoff_regions_total") ==
        0);
  CHECK(MetricValue(*after, "kpath_irqoff_timer_ticks_total").value_or(0) >
        MetricValue(*before, "kpath_irqoff_timer_ticks_total").value_or(0));
  CHECK(MetricValue(*after, "kpath_irqoff_threshold_seconds") == 0.010);
  CHECK(MetricValue(*after, "kpath_irqoff_resolution_seconds", {{"method", "software_timer"}}) ==
        0.001);
}

TEST_CASE("a region shorter than the threshold is not reported", "[irqoff]") {
  REQUIRE(IsRoot());
  std::string why;
  std::unique_ptr<IrqOffFixture> fixture = IrqOffFixture::Load(&why);
  if (!fixture) {
    WARN("skipped: " << why);
    return;
  }
  KpathdProcess kpathd({.config_yaml = Config("irqoff:\n  threshold: 20ms\n")});
  REQUIRE(kpathd.WaitUntilServing());
  std::vector<std::chrono::nanoseconds> held =
      fixture->HoldIrqsOff(LastCpu(), 8ms, 4, 100ms, kFixtureThread);
  REQUIRE(held.size() == 4);
  std::this_thread::sleep_for(700ms);
  auto body = kpathd.Scrape();
  REQUIRE(body);
  CHECK(SumOf(*body, "kpath_irqoff_regions_total", {{"comm", kFixtureThread}}) == 0);
}

TEST_CASE("a CPU taken offline and back gets its timer again and still sees regions",
          "[irqoff][hotplug]") {
  REQUIRE(IsRoot());
  const int cpu = LastCpu();
  const std::string online = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/online";
  if (cpu == 0 || !std::filesystem::exists(online)) {
    WARN("skipped: CPU " << cpu << " cannot be taken offline here (no " << online << ")");
    return;
  }
  std::string why;
  std::unique_ptr<IrqOffFixture> fixture = IrqOffFixture::Load(&why);
  if (!fixture) {
    WARN("skipped: " << why);
    return;
  }
  KpathdProcess kpathd({.config_yaml = Config()});
  REQUIRE(kpathd.WaitUntilServing());
  // Brings the CPU back whatever happens below.
  struct OnlineAgain {
    std::string path;
    ~OnlineAgain() { std::ofstream(path) << "1\n"; }
  } guard{online};
  { std::ofstream(online) << "0\n"; }
  std::this_thread::sleep_for(800ms);
  { std::ofstream(online) << "1\n"; }
  std::this_thread::sleep_for(800ms);
  std::string log = kpathd.Output();
  INFO(log);
  CHECK(log.find("CPU " + std::to_string(cpu) + " went offline") != std::string::npos);
  CHECK(log.find("CPU " + std::to_string(cpu) + " is online, its timer is attached") !=
        std::string::npos);
  std::vector<std::chrono::nanoseconds> held =
      fixture->HoldIrqsOff(cpu, 30ms, 3, 150ms, kFixtureThread);
  REQUIRE(held.size() == 3);
  std::this_thread::sleep_for(700ms);
  auto body = kpathd.Scrape();
  REQUIRE(body);
  CHECK(SumOf(*body, "kpath_irqoff_regions_total", {{"comm", kFixtureThread}}) >= 2);
}
