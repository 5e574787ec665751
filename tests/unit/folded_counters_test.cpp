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
    CHECK(SumSeries(c, 0) == expected_calls);
    CHECK(SumSeries(c, 1) == expected_bytes);
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
    CHECK(SumSeries(c, 0) == total);
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
    CHECK(SumSeries(c, 0) == total);
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
  // The steady series' total moved into "other"; nothing was lost.
  CHECK(SumSeries(c, 0) == 100 + 100 + 150 + 3000);
}
