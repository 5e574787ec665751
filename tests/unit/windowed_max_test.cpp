#include "probes/collect/windowed_max.h"

#include <catch2/catch.hpp>
#include <limits>
#include <map>

namespace kpath {
namespace {

// The fake clock: seconds after 2026-01-01.
absl::Time At(int seconds) { return absl::FromUnixSeconds(1767225600 + seconds); }

TEST_CASE("WindowedMax holds a sample's maximum for exactly the window", "[windowed_max]") {
  WindowedMax max(absl::Seconds(60));
  CHECK(max.Max() == 0);
  max.Add(At(0), 0.189);
  // Sampled every 5 s: the value served between samples is the one of the last sample.
  for (int s = 5; s < 60; s += 5) {
    max.Add(At(s), 0);
    CHECK(max.Max() == 0.189);
  }
  max.Add(At(60), 0);
  CHECK(max.Max() == 0);
}

TEST_CASE("WindowedMax gives the largest in the window, then the next largest", "[windowed_max]") {
  WindowedMax max(absl::Seconds(30));
  max.Add(At(0), 0.050);
  max.Add(At(10), 0.020);
  max.Add(At(20), 0.030);
  CHECK(max.Max() == 0.050);
  max.Add(At(30), 0);  // 0.050 leaves; 0.030 outlived 0.020
  CHECK(max.Max() == 0.030);
  CHECK(max.size() == 2);
  max.Add(At(50), 0.010);
  CHECK(max.Max() == 0.010);
  max.Add(At(80), 0);
  CHECK(max.Max() == 0);
  CHECK(max.size() == 1);
}

TEST_CASE("WindowedMax keeps a decreasing run, not every sample", "[windowed_max]") {
  WindowedMax max(absl::Hours(1));
  for (int i = 0; i < 720; ++i) max.Add(At(5 * i), 0.001 * (i % 7));
  CHECK(max.Max() == Approx(0.006));
  CHECK(max.size() <= 7);
}

TEST_CASE("WindowedMax restarts when the clock steps back and ignores junk", "[windowed_max]") {
  WindowedMax max(absl::Seconds(60));
  max.Add(At(100), 0.5);
  max.Add(At(50), 0.01);
  CHECK(max.Max() == 0.01);
  max.Add(At(55), std::numeric_limits<double>::quiet_NaN());
  max.Add(absl::InfiniteFuture(), 9);
  CHECK(max.Max() == 0.01);
  WindowedMax none(absl::ZeroDuration());
  none.Add(At(0), 3);
  none.Add(At(1), 1);
  CHECK(none.Max() == 1);
}

// The point of the window (operator review D2): kpathd samples every 5 s, Prometheus scrapes
// every 15-60 s at its own phase. Simulates 10 minutes with one 20-39 ms region in every eleventh
// sampling interval; returns how many of those regions a scraper saw the length of.
struct Seen {
  int seen = 0;
  int regions = 0;
};
Seen ScrapedMaxima(absl::Duration window, int scrape, int phase) {
  WindowedMax max(window);
  std::map<int, double> sampled;  // sample time -> that interval's maximum
  std::map<int, bool> seen;
  double served = 0;  // /metrics serves the last sample's snapshot
  for (int t = 0; t <= 600; ++t) {
    if (t % 5 == 0) {
      double v = (t / 5) % 11 == 3 ? 0.020 + 0.001 * (t % 20) : 0;
      if (v > 0) sampled[t] = v;
      max.Add(At(t), v);
      served = max.Max();
    }
    if (t >= phase && (t - phase) % scrape == 0) {
      for (auto& [when, v] : sampled) {
        if (served >= v && t >= when && t < when + 60) seen[when] = true;
      }
    }
  }
  Seen result;
  for (auto& [when, v] : sampled) {
    if (when + 60 > 600) continue;  // the scrapes stop before its window ends
    ++result.regions;
    if (seen[when]) ++result.seen;
  }
  return result;
}

TEST_CASE("Every scraper sees every sampled maximum when the window covers its interval",
          "[windowed_max]") {
  for (int scrape : {15, 30, 60}) {
    for (int phase : {0, 1, 2, 3, 4, 7, 13}) {
      INFO("scrape every " << scrape << " s, phase " << phase);
      Seen s = ScrapedMaxima(absl::Seconds(60), scrape, phase);
      CHECK(s.regions >= 9);
      CHECK(s.seen == s.regions);
    }
  }
}

TEST_CASE("A maximum reset at every sample hides most regions from a 30 s scraper",
          "[windowed_max]") {
  // What kpathd did before irqoff.max_window: the window was one sample.
  Seen s = ScrapedMaxima(absl::ZeroDuration(), 30, 7);
  CHECK(s.seen * 3 < s.regions);
}

}  // namespace
}  // namespace kpath
