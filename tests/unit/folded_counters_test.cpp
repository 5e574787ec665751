#include "probes/collect/folded_counters.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

using namespace kpath;

namespace {
uint64_t SumSeries(const FoldedCounters& c, size_t field) {
  uint64_t sum = 0;
  for (const auto& [key, values] : c.series()) sum += values[field];
  return sum;
}
uint64_t SumEvicted(const FoldedCounters& c, size_t field) {
  uint64_t sum = 0;
  for (const auto& [key, values] : c.evicted()) sum += values[field];
  return sum;
}
// What an exact total is made of: the exported series plus the ended ones.
uint64_t Exact(const FoldedCounters& c, size_t field) {
  return SumSeries(c, field) + SumEvicted(c, field);
}
uint64_t ValueOf(const FoldedCounters& c, const std::vector<std::string>& key) {
  auto it = c.series().find(key);
  return it == c.series().end() ? 0 : it->second[0];
}
std::vector<uint64_t> D(uint64_t a, uint64_t b = 0) { return {a, b}; }
}  // namespace

TEST_CASE("below the budget every key is its own series with exact values", "[folding]") {
  FoldedCounters c({"comm", "advice"}, {5, 5}, 2);
  c.Add({"go", "dontneed"}, D(10, 40960));
  c.Add({"java", "free"}, D(2, 8192));
  c.EndInterval();
  c.Add({"go", "dontneed"}, D(5, 20480));
  c.EndInterval();
  REQUIRE(c.series().size() == 2);
  CHECK(c.series().at({"go", "dontneed"}) == std::vector<uint64_t>{15, 61440});
  CHECK(c.series().at({"java", "free"}) == std::vector<uint64_t>{2, 8192});
  CHECK(c.total(0) == 17);
  CHECK(c.total(1) == 69632);
}

TEST_CASE("a storm of distinct names stays within the budget with totals exact", "[folding]") {
  FoldedCounters c({"comm"}, {3}, 2);
  uint64_t expected_calls = 0, expected_bytes = 0;
  for (int interval = 0; interval < 20; ++interval) {
    for (int i = 0; i < 500; ++i) {
      uint64_t calls = 1 + static_cast<uint64_t>(i % 7);
      c.Add({"proc-" + std::to_string(interval * 500 + i)}, D(calls, calls * 4096));
      expected_calls += calls;
      expected_bytes += calls * 4096;
    }
    c.Add({"storm-leader"}, D(1000, 4096000));
    expected_calls += 1000;
    expected_bytes += 4096000;
    c.EndInterval();
    CHECK(c.series().size() <= c.budget());
    CHECK(c.evicted().size() <= c.budget());
    CHECK(Exact(c, 0) == expected_calls);
    CHECK(Exact(c, 1) == expected_bytes);
  }
  CHECK(c.budget() == 4);
  CHECK(c.series().count({"storm-leader"}) == 1);
  CHECK(c.series().count({FoldedCounters::kOther}) == 1);
  CHECK(c.TopValue(0) == "storm-leader");
}

TEST_CASE("every exported series only grows while the top-N changes", "[folding]") {
  FoldedCounters c({"comm", "caller"}, {2, 2}, 1);
  std::mt19937 rng(42);
  std::map<std::vector<std::string>, uint64_t> previous;
  uint64_t total = 0;
  for (int interval = 0; interval < 200; ++interval) {
    for (int k = 0; k < 30; ++k) {
      uint64_t v = rng() % 100;
      c.Add({"comm-" + std::to_string(rng() % 12), "fn-" + std::to_string(rng() % 6)}, D(v));
      total += v;
    }
    c.EndInterval();
    for (const auto& [key, values] : c.series()) {
      auto it = previous.find(key);
      if (it != previous.end()) CHECK(values[0] >= it->second);
    }
    previous.clear();
    for (const auto& [key, values] : c.series()) previous[key] = values[0];
    CHECK(c.series().size() <= c.budget());
    CHECK(Exact(c, 0) == total);
  }
}

TEST_CASE("overflow counts without a key go to the all-other series", "[folding]") {
  FoldedCounters c({"comm", "caller"}, {2, 2}, 2);
  c.AddOther(D(7, 70));
  c.EndInterval();
  CHECK(c.series().at({"other", "other"}) == std::vector<uint64_t>{7, 70});
  CHECK(c.total(0) == 7);
}

TEST_CASE("series carry the label names in order", "[folding]") {
  FoldedCounters c({"comm", "advice"}, {5, 5}, 2);
  c.Add({"go", "dontneed"}, D(3, 12288));
  c.EndInterval();
  MetricFamilies out;
  auto f = Counter("kpath_madvise_calls_total", "x");
  c.AppendTo(f, 0);
  f.AppendTo(out);
  REQUIRE(out[0].metric.size() == 1);
  CHECK(out[0].metric[0].label[0].name == "comm");
  CHECK(out[0].metric[0].label[0].value == "go");
  CHECK(out[0].metric[0].label[1].name == "advice");
  CHECK(out[0].metric[0].counter.value == 3);
}

TEST_CASE("every label shows at most its top-N values besides other", "[folding]") {
  FoldedCounters c({"comm", "caller"}, {3, 2}, 1);
  std::mt19937 rng(7);
  uint64_t total = 0;
  for (int interval = 0; interval < 100; ++interval) {
    for (int k = 0; k < 40; ++k) {
      uint64_t v = 1 + rng() % 50;
      c.Add({"comm-" + std::to_string(rng() % 30), "fn-" + std::to_string(rng() % 9)}, D(v));
      total += v;
    }
    c.EndInterval();
    std::set<std::string> comms, callers;
    for (const auto& [key, values] : c.series()) {
      if (key[0] != FoldedCounters::kOther) comms.insert(key[0]);
      if (key[1] != FoldedCounters::kOther) callers.insert(key[1]);
    }
    CHECK(comms.size() <= 3);
    CHECK(callers.size() <= 2);
    CHECK(Exact(c, 0) == total);
  }
}

TEST_CASE("a value keeps its series unless a newcomer is twice as busy", "[folding]") {
  FoldedCounters c({"comm"}, {1}, 1, /*decay=*/0.5);
  c.Add({"steady"}, D(100));
  c.EndInterval();
  c.Add({"steady"}, D(100));
  c.Add({"newcomer"}, D(150));  // busier, but not twice the incumbent's activity
  c.EndInterval();
  CHECK(c.series().count({"steady"}) == 1);
  CHECK(c.series().count({"newcomer"}) == 0);
  for (int i = 0; i < 3; ++i) {
    c.Add({"newcomer"}, D(1000));
    c.EndInterval();
  }
  CHECK(c.series().count({"newcomer"}) == 1);
  CHECK(c.series().count({"steady"}) == 0);
  // The steady series ended; its total is among the evicted ones, not in "other" (which holds
  // only the newcomer's 150 from before it had a series of its own). Nothing was lost.
  CHECK(c.series().at({"newcomer"}) == std::vector<uint64_t>{3000});
  CHECK(c.series().at({"other"}) == std::vector<uint64_t>{150});
  CHECK(c.evicted().at({"other"}) == std::vector<uint64_t>{200});
  CHECK(Exact(c, 0) == 100 + 100 + 150 + 3000);
}

// Issue 19 (D1): folding must not move "other" by an evicted series' past, or rate() of "other"
// and every sum(rate()) see a burst that never happened.
TEST_CASE("a value that leaves the top-N moves other by its new increments only", "[folding]") {
  FoldedCounters c({"comm", "culprit"}, {1, 5}, 1, /*decay=*/0.5);
  c.Add({"ss", "s_show"}, D(4));  // four IRQ-off regions
  c.EndInterval();
  REQUIRE(ValueOf(c, {"ss", "s_show"}) == 4);
  // A busier comm takes the only place: ss's series ends, and "other" does not appear with 4.
  for (int i = 0; i < 3; ++i) {
    c.Add({"busy", "s_show"}, D(100));
    c.EndInterval();
  }
  REQUIRE(c.series().count({"ss", "s_show"}) == 0);
  CHECK(c.series().count({"other", "s_show"}) == 0);
  CHECK(c.evicted().at({"other", "s_show"}) == std::vector<uint64_t>{4});
  // ss's next region is a new increment: "other" grows by exactly 1.
  c.Add({"ss", "s_show"}, D(1));
  c.Add({"busy", "s_show"}, D(100));
  c.EndInterval();
  CHECK(c.series().at({"other", "s_show"}) == std::vector<uint64_t>{1});
  CHECK(c.evicted().at({"other", "s_show"}) == std::vector<uint64_t>{4});
  CHECK(Exact(c, 0) == 4 + 300 + 1 + 100);
  // Exported: the live family, then its *_evicted_total with ss's series under its other form.
  MetricFamilies out;
  c.AppendFamilies({"live_total", "x", MetricType::kCounter},
                   {"live_evicted_total", "x", MetricType::kCounter}, 0, out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].metric.size() == 2);  // busy and other
  REQUIRE(out[1].metric.size() == 1);
  const prometheus::ClientMetric& ended = out[1].metric[0];
  CHECK((ended.label[0].name == "comm" && ended.label[0].value == "other"));
  CHECK((ended.label[1].name == "culprit" && ended.label[1].value == "s_show"));
  CHECK(ended.counter.value == 4);
}

TEST_CASE("every interval, other grows by exactly the increments folded into it", "[folding]") {
  FoldedCounters c({"comm"}, {3}, 1, /*decay=*/0.7);
  std::mt19937 rng(19);
  uint64_t total = 0;
  size_t evictions = 0;
  for (int interval = 0; interval < 300; ++interval) {
    const uint64_t other_before = ValueOf(c, {"other"});
    const uint64_t evicted_before = c.evicted().empty() ? 0 : c.evicted().begin()->second[0];
    std::map<std::string, uint64_t> added;
    for (int k = 0; k < 8; ++k) {
      // Skewed and drifting, so that the top 3 change often.
      std::string comm = "comm-";  // appended in steps (GCC bug 105329, docs/development.md)
      comm += std::to_string((rng() % 6 + interval / 25) % 15);
      uint64_t v = 1 + rng() % (k < 2 ? 200 : 20);
      added[comm] += v;
      c.Add({comm}, D(v));
      total += v;
    }
    c.EndInterval();
    uint64_t folded = 0;  // this interval's increments of values not exported as themselves
    for (const auto& [comm, v] : added) {
      if (!c.series().count({comm})) folded += v;
    }
    INFO("interval " << interval);
    CHECK(ValueOf(c, {"other"}) - other_before == folded);
    const uint64_t evicted_now = c.evicted().empty() ? 0 : c.evicted().begin()->second[0];
    if (evicted_now != evicted_before) ++evictions;
    CHECK(Exact(c, 0) == total);
  }
  CHECK(evictions >= 5);  // the test saw values leave the top-N
}

TEST_CASE("a value back in the top-N starts a new series from its new increments", "[folding]") {
  FoldedCounters c({"comm"}, {1}, 1, /*decay=*/0.5);
  c.Add({"a"}, D(50));
  c.EndInterval();
  for (int i = 0; i < 3; ++i) {
    c.Add({"b"}, D(500));
    c.EndInterval();
  }
  REQUIRE(c.series().count({"a"}) == 0);
  for (int i = 0; i < 4; ++i) {
    c.Add({"a"}, D(5000));
    c.EndInterval();
  }
  // a came back: its new series counts from the interval it was exported again, never its past.
  REQUIRE(c.series().count({"a"}) == 1);
  CHECK(c.series().at({"a"})[0] == 4 * 5000);
  CHECK(c.evicted().at({"other"})[0] == 50 + 1500);
  CHECK(Exact(c, 0) == 50 + 1500 + 20000);
}

TEST_CASE("values that do not match the label names are counted under other, not lost",
          "[folded]") {
  FoldedCounters c({"comm", "culprit", "pod"}, {5, 5, 5}, 1);
  const uint64_t one = 1;
  c.Add({"kworker", "fn"}, std::span<const uint64_t>(&one, 1));  // a value short
  c.Add({"kworker", "fn", "", "extra"}, std::span<const uint64_t>(&one, 1));
  c.Add({"kworker", "fn", "web-1"}, std::span<const uint64_t>(&one, 1));
  c.EndInterval();
  CHECK(Exact(c, 0) == 3);
  CHECK(ValueOf(c, {"other", "other", "other"}) == 2);
  CHECK(ValueOf(c, {"kworker", "fn", "web-1"}) == 1);
  for (const auto& [key, values] : c.series()) CHECK(key.size() == 3);
}
