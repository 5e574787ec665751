// seed 002: kernel hooks of other software on hot functions, and the CPU their BPF programs
// cost.
#include <algorithm>

#include "daemon/diagnose/rule.h"
#include "daemon/events/event_json.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/hooks/hooks_metrics.h"

namespace kpath::diagnose {

namespace {

// "hooks that appeared since boot": those the running kpathd (or the watch) saw appear after its
// first inventory, with when, and whether they left since.
void AppearedHooks(const Observation& o, Finding& f) {
  std::vector<std::string> appeared;
  size_t at_start = 0;
  for (const std::string& line : EventsOf(o, event_kind::kHookAppeared)) {
    if (JsonField(line, "at_start") == "1") {
      ++at_start;
    } else {
      appeared.push_back(fmt::format("  {}: {}", JsonField(line, "time").value_or("?"),
                                     JsonField(line, "message").value_or("")));
    }
  }
  const std::vector<std::string> left = EventsOf(o, event_kind::kHookLeft);
  if (o.events_source.empty()) return;
  f.evidence.push_back(fmt::format("{} hook{} appeared and {} left in {} ({} there at its start)",
                                   appeared.size(), appeared.size() == 1 ? "" : "s", left.size(),
                                   o.events_source, at_start));
  for (size_t i = 0; i < appeared.size() && i < 10; ++i) f.evidence.push_back(appeared[i]);
  if (appeared.size() > 10)
    f.evidence.push_back(fmt::format("  ... {} more", appeared.size() - 10));
  for (size_t i = 0; i < left.size() && i < 10; ++i) {
    f.evidence.push_back(fmt::format("  {}: {}", JsonField(left[i], "time").value_or("?"),
                                     JsonField(left[i], "message").value_or("")));
  }
}

void InventoryHooks(const Watch& w, Finding& f);

}  // namespace

void ForeignHooks(const Watch& w, Finding& f) {
  InventoryHooks(w, f);
  if (f.state != Finding::State::kNotChecked) AppearedHooks(w.observation, f);
}

namespace {

// The inventory at the end of the watch: hooks on hot functions, and the CPU their programs cost.
void InventoryHooks(const Watch& w, Finding& f) {
  if (!w.last.Has(hooks_metrics::kForeignHooks)) {
    f.state = Finding::State::kNotChecked;
    f.summary = "not checked: the foreign-hook inventory is off (hooks.enabled) or failing";
    return;
  }
  const double secs = w.Seconds();
  double all = 0;
  for (const Sample& s : w.last.Get(hooks_metrics::kForeignHooks)) all += s.value;
  double hidden = w.last.Value(hooks_metrics::kHiddenKprobes).value_or(0);
  f.evidence.push_back(
      fmt::format("{} foreign hooks, {} of them kprobes or kretprobes", Count(all), Count(hidden)));
  // The set as one value, to hold against another node's (issue 22: KpathForeignHookSetDrift).
  for (const Sample& s : w.last.Get(hooks_metrics::kForeignHookSetInfo)) {
    if (!s.labels.count("fingerprint") || !s.labels.count("hooks")) continue;
    f.evidence.push_back(fmt::format(
        "hook set {} ({} distinct kind, target and owner): a node with the same hooks shows the "
        "same",
        s.labels.at("fingerprint"), s.labels.at("hooks")));
  }
  // Hot hooks by owner, with their targets.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> hot;
  std::map<std::pair<std::string, std::string>, double> hot_count;
  for (const Sample& s : w.last.Get(hooks_metrics::kForeignHookInfo)) {
    if (!s.labels.count("hot") || s.labels.at("hot") != "true") continue;
    auto get = [&](const char* k) { return s.labels.count(k) ? s.labels.at(k) : std::string(); };
    auto owner = std::make_pair(get("owner"), get("unit"));
    hot[owner].push_back(fmt::format("{} on {}", get("kind"), get("target")));
    hot_count[owner] += s.value;
  }
  for (const auto& [owner, targets] : hot) {
    std::vector<std::string> shown(targets.begin(),
                                   targets.begin() + std::min<size_t>(targets.size(), 5));
    f.evidence.push_back(fmt::format("{} (unit {}) hooks {} hot kernel functions: {}{}",
                                     owner.first, owner.second.empty() ? "none" : owner.second,
                                     Count(hot_count[owner]), fmt::join(shown, ", "),
                                     targets.size() > shown.size() ? ", ..." : ""));
    f.culprits.push_back(Culprit{{{"owner", owner.first}, {"unit", owner.second}},
                                 hot_count[owner],
                                 "hooks on hot functions"});
  }
  auto cpu = w.Growth(hooks_metrics::kForeignBpfRunSecondsTotal, {"owner"});
  std::vector<std::string> costly;
  for (const auto& [key, s] : Top(cpu, 5)) {
    double cpus = s / secs;
    f.evidence.push_back(
        fmt::format("BPF programs of {} ran {:.3f} CPU-seconds per second", key[0], cpus));
    f.culprits.push_back(Culprit{{{"owner", key[0]}}, cpus, "CPU-seconds per second"});
    if (cpus >= w.thresholds.foreign_bpf_cpus) costly.push_back(key[0]);
  }
  if (hot.empty() && costly.empty()) {
    f.state = Finding::State::kOk;
    f.summary =
        fmt::format("no foreign hook on a hot function ({} foreign hooks elsewhere)", Count(all));
    return;
  }
  f.state = Finding::State::kFound;
  std::vector<std::string> owners;
  for (const auto& [owner, targets] : hot) owners.push_back(owner.first);
  for (const std::string& c : costly)
    if (std::find(owners.begin(), owners.end(), c) == owners.end()) owners.push_back(c);
  f.summary = fmt::format(
      "{} hook hot kernel functions or spend CPU in BPF programs on every "
      "call of the paths they watch",
      fmt::join(owners, ", "));
  f.fixes.push_back(
      "Reconfigure or stop the owning agent, with its owners' and security's agreement "
      "(systemctl stop <unit>; many agents can turn their kprobe/eBPF monitoring off). Risk: "
      "the host loses that monitoring.");
  f.fixes.push_back(
      "Disarm every kprobe at once: echo 0 > /sys/kernel/debug/kprobes/enabled (seed 002: %sys "
      "from 30% to under 10%). Risk: it disarms all kprobes, other tools' too, and the agent may "
      "fail silently; tracepoints, fentry and uprobes stay. Not persistent across reboots.");
}

}  // namespace

}  // namespace kpath::diagnose
