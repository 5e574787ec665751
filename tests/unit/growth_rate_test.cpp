#include "probes/collect/growth_rate.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "absl/time/time.h"

namespace kpath {
namespace {

// A realistic epoch time, so the tests also cover the centring on the first sample.
const absl::Time kT0 = absl::FromUnixSeconds(1767225600);

absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

TEST_CASE("WindowedSlope gives the exact slope of a linear series", "[growth_rate]") {
  WindowedSlope slope(absl::Minutes(1));
  // Percpu-sized values (21 GiB) growing 340 KiB/s, sampled every 5 s.
  const double base = 21.0 * (1ull << 30);
  for (int i = 0; i <= 12; ++i) slope.Add(At(5 * i), base + 340 * 1024.0 * 5 * i);
  REQUIRE(slope.PerSecond().has_value());
  CHECK(*slope.PerSecond() == Approx(340 * 1024.0).epsilon(1e-9));
}

TEST_CASE("WindowedSlope with sub-second spacing is exact too", "[growth_rate]") {
  WindowedSlope slope(absl::Seconds(10));
  for (int i = 0; i < 20; ++i) slope.Add(kT0 + absl::Milliseconds(250 * i), -3.0 * 0.25 * i);
  CHECK(*slope.PerSecond() == Approx(-3.0).epsilon(1e-12));
}

TEST_CASE("WindowedSlope: one spike at the window's edge barely moves the slope", "[growth_rate]") {
  WindowedSlope slope(absl::Minutes(1));
  double last = 0;
  for (int i = 0; i <= 60; ++i) {
    last = 100.0 * i + (i == 60 ? 6000.0 : 0.0);  // the newest sample is off by 60 s worth
    slope.Add(At(i), last);
  }
  const double endpoint_difference = (last - 0.0) / 60.0;
  CHECK(endpoint_difference == Approx(200.0));  // doubled by the spike
  REQUIRE(slope.PerSecond().has_value());
  const double ols = *slope.PerSecond();
  CHECK(std::fabs(ols - 100.0) < 0.1 * std::fabs(endpoint_difference - 100.0));
}

TEST_CASE("WindowedSlope drops samples older than the window on Add", "[growth_rate]") {
  WindowedSlope slope(absl::Seconds(10));
  // A steep start that must fall out of the window, then a flat series.
  slope.Add(At(0), 0);
  slope.Add(At(1), 1000);
  for (int i = 2; i <= 20; ++i) slope.Add(At(i), 1000);
  CHECK(slope.size() == 11);  // t = 10..20: the window's start is inclusive
  REQUIRE(slope.PerSecond().has_value());
  CHECK(*slope.PerSecond() == 0.0);
}

TEST_CASE("WindowedSlope needs two samples with distinct times", "[growth_rate]") {
  WindowedSlope slope(absl::Seconds(10));
  CHECK_FALSE(slope.PerSecond().has_value());
  slope.Add(At(0), 5);
  CHECK_FALSE(slope.PerSecond().has_value());
  slope.Add(At(0), 7);  // same instant: no time spread
  CHECK_FALSE(slope.PerSecond().has_value());
  slope.Add(At(2), 9);
  REQUIRE(slope.PerSecond().has_value());
  CHECK(*slope.PerSecond() == Approx(1.5));  // fit through (0,5), (0,7), (2,9)
}

TEST_CASE("WindowedSlope::SetWindow shrinks the window at once and widens it for later samples",
          "[growth_rate]") {
  WindowedSlope slope(absl::Minutes(1));
  for (int i = 0; i <= 30; ++i) slope.Add(At(i), i < 20 ? 0.0 : 10.0 * (i - 20));
  CHECK(slope.size() == 31);
  slope.SetWindow(absl::Seconds(10));
  CHECK(slope.window() == absl::Seconds(10));
  CHECK(slope.size() == 11);  // t = 20..30, the linear part only
  CHECK(*slope.PerSecond() == Approx(10.0));

  slope.SetWindow(absl::Minutes(1));
  for (int i = 31; i <= 40; ++i) slope.Add(At(i), 10.0 * (i - 20));
  CHECK(slope.size() == 21);  // nothing evicted by the wider window
  CHECK(*slope.PerSecond() == Approx(10.0));

  slope.SetWindow(absl::ZeroDuration());
  CHECK(slope.size() == 1);
  CHECK_FALSE(slope.PerSecond().has_value());
}

TEST_CASE("WindowedSlope restarts when the clock steps back", "[growth_rate]") {
  WindowedSlope slope(absl::Minutes(1));
  slope.Add(At(10), 0);
  slope.Add(At(11), 1000);
  slope.Add(At(5), 50);  // wall clock set back
  CHECK(slope.size() == 1);
  slope.Add(At(6), 52);
  CHECK(*slope.PerSecond() == Approx(2.0));
}

TEST_CASE("WindowedSlope ignores non-finite values and infinite times", "[growth_rate]") {
  WindowedSlope slope(absl::Minutes(1));
  slope.Add(At(0), 0);
  slope.Add(At(1), std::numeric_limits<double>::quiet_NaN());
  slope.Add(At(1), std::numeric_limits<double>::infinity());
  slope.Add(absl::InfiniteFuture(), 1);
  slope.Add(absl::InfinitePast(), 1);
  slope.Add(At(2), 4);
  CHECK(slope.size() == 2);
  CHECK(*slope.PerSecond() == Approx(2.0));
}

}  // namespace
}  // namespace kpath
