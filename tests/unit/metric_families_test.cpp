#include <catch2/catch.hpp>
#include <cmath>

#include "probes/collect/label_values.h"
#include "probes/collect/metric_families.h"
#include "prometheus/text_serializer.h"

using namespace kpath;

namespace {
std::string Serialize(const MetricFamilies& families) {
  return prometheus::TextSerializer().Serialize(families);
}
}  // namespace

TEST_CASE("gauges and counters carry their labels and values", "[metrics]") {
  MetricFamilies out;
  Gauge("kpath_x_bytes", "X.").Add({{"field", "Percpu"}}, 1024).AppendTo(out);
  Counter("kpath_y_total", "Y.").Add(3).AppendTo(out);
  std::string text = Serialize(out);
  CHECK_THAT(text, Catch::Contains("# TYPE kpath_x_bytes gauge"));
  CHECK_THAT(text, Catch::Contains("kpath_x_bytes{field=\"Percpu\"} 1024"));
  CHECK_THAT(text, Catch::Contains("# TYPE kpath_y_total counter"));
  CHECK_THAT(text, Catch::Contains("kpath_y_total 3"));
}

TEST_CASE("histograms are cumulative and end with the +Inf bucket", "[metrics]") {
  MetricFamilies out;
  Histogram("kpath_h_seconds", "H.").AddHistogram({}, {0.001, 0.01}, {2, 3, 5}, 1.5).AppendTo(out);
  REQUIRE(out.size() == 1);
  const auto& h = out[0].metric.at(0).histogram;
  REQUIRE(h.bucket.size() == 3);
  CHECK(h.bucket[0].cumulative_count == 2);
  CHECK(h.bucket[1].cumulative_count == 5);
  CHECK(h.bucket[2].cumulative_count == 10);
  CHECK(std::isinf(h.bucket[2].upper_bound));
  CHECK(h.sample_count == 10);
  std::string text = Serialize(out);
  CHECK_THAT(text, Catch::Contains("kpath_h_seconds_bucket{le=\"+Inf\"} 10"));
  CHECK_THAT(text, Catch::Contains("kpath_h_seconds_count 10"));
}

TEST_CASE("a builder is empty again after AppendTo", "[metrics]") {
  MetricFamilies out;
  auto b = Gauge("kpath_g", "G.");
  b.Add(1);
  CHECK_FALSE(b.empty());
  b.AppendTo(out);
  CHECK(b.empty());
}

TEST_CASE("label values from kernel bytes are made valid UTF-8", "[metrics]") {
  CHECK(SanitizeLabelValue("systemd") == "systemd");
  CHECK(SanitizeLabelValue("kworker/0:1H") == "kworker/0:1H");
  CHECK(SanitizeLabelValue("caf\xc3\xa9") == "caf\xc3\xa9");  // é
  CHECK(SanitizeLabelValue("ab\xe4\xb8") == "ab??");          // cut inside a character
  CHECK(SanitizeLabelValue("a\xff"
                           "b") == "a?b");             // never valid
  CHECK(SanitizeLabelValue("x\xc0\xaf") == "x??");     // overlong '/'
  CHECK(SanitizeLabelValue("t\tab\n") == "t?ab?");     // control characters
  CHECK(SanitizeLabelValue("\xed\xa0\x80") == "???");  // UTF-16 surrogate
  const char comm[16] = {'g', 'o', '\xff', 0, 'x'};
  CHECK(CommLabel(comm, sizeof(comm)) == "go?");
  MetricFamilies out;
  Gauge("kpath_g", "G.").Add({{"comm", "bad\xfe"}}, 1).AppendTo(out);
  CHECK(out[0].metric[0].label[0].value == "bad?");
}
