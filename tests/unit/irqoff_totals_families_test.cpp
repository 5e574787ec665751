// The per-CPU IRQ-off families (probes/irqoff/irqoff_totals_families.h): which CPUs get a series,
// and that each carries its own CPU's kernel totals.
#include "probes/irqoff/irqoff_totals_families.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "prometheus/text_serializer.h"

using namespace kpath;

namespace {

// cpu label -> value, of family `name` in `families`.
std::map<std::string, double> ByCpu(const MetricFamilies& families, const std::string& name) {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      REQUIRE(m.label.size() == 1);
      CHECK(m.label[0].name == "cpu");
      out[m.label[0].value] = m.counter.value;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("each online CPU has its own regions and seconds, one gone offline keeps its count",
          "[irqoff]") {
  std::vector<irqoff_totals> per_cpu(8);  // 8 possible CPUs
  per_cpu[1].regions = 3;
  per_cpu[1].region_ns = 90'000'000;
  per_cpu[5].regions = 2;  // offline now
  per_cpu[5].region_ns = 25'000'000;
  MetricFamilies out;
  AppendPerCpuFamilies(per_cpu, {0, 1, 2}, out);
  REQUIRE(out.size() == 2);
  // Online CPUs also at 0, so that their first region is an increase rate() sees; CPU 5 keeps
  // what it counted; possible CPUs never online and never counting have no series.
  CHECK(ByCpu(out, "kpath_irqoff_cpu_regions_total") ==
        std::map<std::string, double>{{"0", 0}, {"1", 3}, {"2", 0}, {"5", 2}});
  std::map<std::string, double> seconds = ByCpu(out, "kpath_irqoff_cpu_region_seconds_total");
  REQUIRE(seconds.size() == 4);
  CHECK(seconds["0"] == 0);
  CHECK(seconds["1"] == Approx(0.090));
  CHECK(seconds["5"] == Approx(0.025));
  std::string text = prometheus::TextSerializer().Serialize(out);
  CHECK(text.find("kpath_irqoff_cpu_regions_total{cpu=\"1\"} 3\n") != std::string::npos);
}

TEST_CASE("a 256-CPU host gets two series per CPU, whatever its processes and culprits",
          "[irqoff]") {
  std::vector<irqoff_totals> per_cpu(256);
  std::vector<int> online;
  for (int c = 0; c < 256; ++c) {
    online.push_back(c);
    per_cpu[static_cast<size_t>(c)].regions = static_cast<uint64_t>(c % 3);
  }
  MetricFamilies out;
  AppendPerCpuFamilies(per_cpu, online, out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].metric.size() == 256);
  CHECK(out[1].metric.size() == 256);
  // Without online CPUs (sysfs unreadable) only the CPUs that counted regions are exported.
  MetricFamilies unknown_online;
  AppendPerCpuFamilies(per_cpu, {}, unknown_online);
  CHECK(unknown_online[0].metric.size() == 170);
}
