// deploy/grafana/kpathd-dashboard.json against the mistakes an operator review found in it (issue
// 19, review D5 and D6): per-node panels that summed the whole fleet, a heatmap that counted each
// region 2-4 times, and recording rules shipped for the dashboard that no panel used. The e2e
// test (tests/e2e) runs every query against a real Prometheus; this one needs no root.
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kSource = KPATH_SOURCE_DIR;

YAML::Node Dashboard() {
  // JSON is YAML.
  return YAML::LoadFile((kSource / "deploy/grafana/kpathd-dashboard.json").string());
}

struct Query {
  int panel = 0;
  std::string type;  // the panel's
  std::string expr;
  bool instant = false;
};

std::vector<Query> Queries(const YAML::Node& dashboard) {
  std::vector<Query> out;
  for (const YAML::Node& p : dashboard["panels"]) {
    for (const YAML::Node& t : p["targets"]) {
      if (!t["expr"]) continue;
      out.push_back({p["id"].as<int>(), p["type"].as<std::string>(), t["expr"].as<std::string>(),
                     t["instant"] && t["instant"].as<bool>()});
    }
  }
  return out;
}

std::set<std::string> RecordedNames() {
  std::set<std::string> names;
  YAML::Node rules = YAML::LoadFile((kSource / "deploy/prometheus/kpathd-rules.yml").string());
  for (const YAML::Node& g : rules["groups"])
    for (const YAML::Node& r : g["rules"])
      if (r["record"]) names.insert(r["record"].as<std::string>());
  return names;
}

}  // namespace

TEST_CASE("the node selector picks one node, so per-node panels never sum the fleet") {
  YAML::Node node;
  for (const YAML::Node& v : Dashboard()["templating"]["list"])
    if (v["name"].as<std::string>() == "node") node = v;
  REQUIRE(node);
  // Multi-select with All made `sum by (comm)` of a per-node panel a fleet-wide sum (D5).
  CHECK_FALSE(node["multi"].as<bool>());
  CHECK_FALSE(node["includeAll"].as<bool>());
}

TEST_CASE("no panel drawn over time counts a window wider than its step") {
  // increase(x[$__rate_interval]) at step $__interval puts each event in 2-4 points (D6).
  const std::regex wide(R"(increase\([^)]*\[\$__rate_interval\])");
  for (const Query& q : Queries(Dashboard())) {
    if (q.instant) continue;
    INFO("panel " << q.panel << " (" << q.type << "): " << q.expr);
    CHECK_FALSE(std::regex_search(q.expr, wide));
  }
}

TEST_CASE("the dashboard uses the shipped recording rules, and only rules that exist") {
  const std::set<std::string> recorded = RecordedNames();
  REQUIRE_FALSE(recorded.empty());
  const std::regex rule_name(
      R"(\b(?:instance|fleet|role|role_fingerprint|hook):[a-z0-9_]+:[a-z0-9_]+\b)");
  std::set<std::string> used;
  for (const Query& q : Queries(Dashboard())) {
    for (auto it = std::sregex_iterator(q.expr.begin(), q.expr.end(), rule_name);
         it != std::sregex_iterator(); ++it) {
      INFO("panel " << q.panel << ": " << q.expr);
      CHECK(recorded.count(it->str()) == 1);
      used.insert(it->str());
    }
  }
  // The fleet rules exist for the fleet row: each one is a panel there. So do the per-role set
  // counts and the per-hook rollout counts (issue 22).
  for (const std::string& name : recorded) {
    if (name.rfind("fleet:", 0) != 0 &&
        name != "role_fingerprint:kpath_foreign_hook_set_nodes:count" &&
        name != "hook:kpath_foreign_hook_new_nodes:count10m") {
      continue;
    }
    INFO("recording rule " << name);
    CHECK(used.count(name) == 1);
  }
}

TEST_CASE("a panel shows which CPU holds IRQs off, on the selected node") {
  // Issue 22: seed 001's stalls were on the CPU that RPS/RFS pinned the service's flows to.
  const std::regex by_cpu(
      R"(sum by \(cpu\) \((rate|increase)\(kpath_irqoff_cpu_region(s|_seconds)_total\{instance=~"\$node"\}\[)");
  std::set<std::string> types;
  for (const Query& q : Queries(Dashboard())) {
    if (std::regex_search(q.expr, by_cpu)) types.insert(q.type);
  }
  // Over time (a heatmap of the share of each CPU's time) and over the range (a bar per CPU).
  CHECK(types == std::set<std::string>{"heatmap", "bargauge"});
}

TEST_CASE("every event kind is an annotation of its own, per node, one step per window") {
  // Prometheus-side annotations from kpath_events_total (docs/events.md, "Grafana"): the
  // dashboard's one data source, no plugin. Each marks the minutes with events of its kinds.
  std::set<std::string> annotated;
  const std::regex kinds(R"re(kpath_events_total\{kind=~?"([a-z_|]+)")re");
  const std::regex window(R"(\[([0-9]+)m\]\) > 0$)");
  for (const YAML::Node& a : Dashboard()["annotations"]["list"]) {
    const std::string expr = a["expr"].as<std::string>();
    std::smatch m;
    if (!std::regex_search(expr, m, kinds)) continue;
    INFO(expr);
    std::string list = m[1].str();
    for (size_t start = 0; start <= list.size();) {
      size_t bar = list.find('|', start);
      if (bar == std::string::npos) bar = list.size();
      annotated.insert(list.substr(start, bar - start));
      start = bar + 1;
    }
    CHECK(expr.find("instance=~\"$node\"") != std::string::npos);
    // The window is the step: each event's minute marked once.
    std::smatch w;
    REQUIRE(std::regex_search(expr, w, window));
    CHECK(a["step"].as<std::string>() == std::to_string(std::stoi(w[1].str()) * 60) + "s");
    CHECK(a["datasource"]["type"].as<std::string>() == "prometheus");
  }
  CHECK(annotated == std::set<std::string>{"irqoff_region", "hook_appeared", "hook_left",
                                           "madvise_storm_start", "madvise_storm_end"});
}
