// seed 000: percpu memory growth, cgroup churn and dying cgroups: which unit and process churn
// cgroups, the kernel functions that allocate per-CPU memory for them, and what stays held.
#include <optional>
#include <set>

#include "daemon/diagnose/rule.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/cgroups/cgroups_metrics.h"
#include "probes/percpu/percpu_metrics.h"
#include "probes/procfs/procfs_metrics.h"

namespace kpath::diagnose {

void PercpuAndChurn(const Watch& w, Finding& f) {
  const double secs = w.Seconds();

  std::optional<double> p0 = w.first.Value(procfs_metrics::kPercpuBytes);
  std::optional<double> p1 = w.last.Value(procfs_metrics::kPercpuBytes);
  double growth = 0;
  if (p0 && p1) {
    growth = (*p1 - *p0) / secs;
    f.evidence.push_back(
        fmt::format("Percpu (/proc/meminfo): {} at the start, {} at the end: {}{} "
                    "({}{}/s)",
                    Bytes(*p0), Bytes(*p1), *p1 >= *p0 ? "+" : "", Bytes(*p1 - *p0),
                    growth >= 0 ? "+" : "", Bytes(growth)));
  }

  // Cgroup creations by unit and process.
  auto made = w.Growth(cgroups_metrics::kCgroupMkdirTotal, {"unit", "comm"});
  auto removed = w.Growth(cgroups_metrics::kCgroupRmdirTotal, {"unit", "comm"});
  std::vector<std::pair<Key, double>> churning;
  for (const auto& [key, n] : Top(made, 5)) {
    double rm = removed.count(key) ? removed.at(key) : 0;
    bool churns = n >= w.thresholds.cgroup_creations_min &&
                  n / secs >= w.thresholds.cgroup_creations_per_second;
    if (churns) churning.emplace_back(key, n);
    f.evidence.push_back(fmt::format(
        "cgroups created for unit {} by process {}: {} ({}), {} "
        "removed{}",
        key[0], key[1], Count(n), Rate(n / secs), Count(rm), churns ? "  <- churn" : ""));
    f.culprits.push_back(Culprit{{{"unit", key[0]}, {"comm", key[1]}}, n, "cgroups created"});
  }
  bool churn_probe = w.Attached("cgroup_churn");
  if (!churn_probe) {
    f.evidence.push_back("cgroup creations: " + w.NotAttached("cgroup_churn"));
  } else if (made.empty() || Total(made) == 0) {
    f.evidence.push_back("no cgroup was created while watching");
  }

  // Per-CPU allocations by process and kernel function.
  auto bytes = w.Growth(percpu_metrics::kAllocBytesTotal, {"comm", "caller"});
  auto allocs = w.Growth(percpu_metrics::kAllocsTotal, {"comm", "caller"});
  // Each churning process's own biggest callers first (that is where the memcg allocations
  // show), then the host's biggest, six lines in all.
  std::vector<std::pair<Key, double>> top_alloc;
  std::map<std::string, std::string> caller_of;  // churning comm -> its biggest caller
  auto listed = [&](const Key& k) {
    for (const auto& [key, n] : top_alloc)
      if (key == k) return true;
    return false;
  };
  for (const auto& [unit_comm, n] : churning) {
    const std::string& comm = unit_comm[1];
    std::map<Key, double> mine;
    for (const auto& [key, b] : bytes)
      if (key[0] == comm) mine[key] = b;
    for (const auto& entry : Top(mine, 2)) {
      if (!caller_of.count(comm)) caller_of[comm] = entry.first[1];
      if (!listed(entry.first) && top_alloc.size() < 4) top_alloc.push_back(entry);
    }
  }
  for (const auto& entry : Top(bytes, 6))
    if (!listed(entry.first) && top_alloc.size() < 6) top_alloc.push_back(entry);
  for (const auto& [key, n] : top_alloc) {
    double count = allocs.count(key) ? allocs.at(key) : 0;
    f.evidence.push_back(
        fmt::format("per-CPU memory allocated by process {} in kernel function "
                    "{}: {} in {} allocations ({}/s)",
                    key[0], key[1], Bytes(n), Count(count), Bytes(n / secs)));
    f.culprits.push_back(Culprit{{{"comm", key[0]}, {"caller", key[1]}}, n, "bytes allocated"});
  }
  if (!w.Attached("percpu_alloc")) {
    f.evidence.push_back("per-CPU allocations: " + w.NotAttached("percpu_alloc"));
  }

  // What stays allocated.
  auto held = w.Growth(percpu_metrics::kOutstandingBytes, {"caller"});
  for (const auto& [key, n] : Top(held, 3)) {
    f.evidence.push_back(
        fmt::format("still allocated at the end, kernel function {}: +{}", key[0], Bytes(n)));
  }

  // Live and dying memory cgroups (cgroup2's totals when the kernel has no per-controller ones).
  std::string controller =
      w.last.Value(cgroups_metrics::kCgroups, {{"controller", "memory"}}) ? "memory" : "cgroup2";
  std::optional<double> live =
      w.last.Value(cgroups_metrics::kCgroups, {{"controller", controller}, {"state", "live"}});
  std::optional<double> dying =
      w.last.Value(cgroups_metrics::kCgroups, {{"controller", controller}, {"state", "dying"}});
  std::optional<double> dying0 =
      w.first.Value(cgroups_metrics::kCgroups, {{"controller", controller}, {"state", "dying"}});
  bool piling = false;
  if (live && dying) {
    piling = *dying > w.thresholds.dying_memory_cgroups && *dying > 2 * *live;
    f.evidence.push_back(fmt::format(
        "{} cgroups: {} live, {} dying ({}{} while watching){}", controller, Count(*live),
        Count(*dying), dying0 && *dying >= *dying0 ? "+" : "",
        dying0 ? Count(*dying - *dying0) : "?", piling ? "  <- removed but still held" : ""));
  }

  bool growing = p0 && p1 &&
                 w.observation.elapsed_seconds >= w.thresholds.percpu_growth_min_seconds &&
                 growth >= w.thresholds.percpu_growth_bytes_per_second;
  if (churning.empty() && !growing && !piling) {
    f.state = Finding::State::kOk;
    f.summary = churn_probe ? fmt::format("no unit churns cgroups; Percpu {}{}/s",
                                          growth >= 0 ? "+" : "", Bytes(growth))
                            : fmt::format("Percpu {}{}/s; cgroup churn not checked",
                                          growth >= 0 ? "+" : "", Bytes(growth));
    return;
  }
  f.state = Finding::State::kFound;
  if (!churning.empty()) {
    std::vector<std::string> units;
    std::set<std::string> callers;
    for (size_t i = 0; i < churning.size() && i < 3; ++i) {
      const auto& [key, n] = churning[i];
      units.push_back(fmt::format("unit {}: {} cgroups created by {} ({})", key[0], Count(n),
                                  key[1], Rate(n / secs)));
      if (caller_of.count(key[1])) callers.insert(caller_of.at(key[1]));
    }
    f.summary =
        fmt::format("{} in {}{}", fmt::join(units, "; "), Seconds(w.observation.elapsed_seconds),
                    callers.empty() ? ""
                                    : fmt::format("; each creation allocates per-CPU "
                                                  "memory in {}",
                                                  fmt::join(callers, ", ")));
    // Systemd's fixes for the units, the others for cgroups outside units or beyond the label
    // budget; each names what it is about.
    std::vector<std::string> named, unitless, folded;
    for (const auto& [key, n] : churning) {
      if (key[0] == "none") {
        unitless.push_back(key[1]);
      } else if (key[0] == "other") {
        folded.push_back(key[1]);
      } else if (named.size() < 3) {
        named.push_back(key[0]);
      }
    }
    if (!named.empty()) {
      std::vector<std::string> edits;
      for (const std::string& u : named) edits.push_back("systemctl edit " + u);
      f.fixes.push_back(fmt::format(
          "Find what starts {} so often (systemctl list-timers --all; systemctl status <unit>). "
          "If it is a second-level timer, run the job as one long-running service that loops "
          "and sleeps instead: one cgroup for its lifetime. Risk: the service must handle its "
          "own failures (Restart=always).",
          fmt::join(named, ", ")));
      f.fixes.push_back(
          "Merge several second-level timers into one timer whose service runs the checks in "
          "turn. Risk: one slow check delays the others.");
      f.fixes.push_back(fmt::format(
          "Turn accounting off for {} ({}: CPUAccounting=no, MemoryAccounting=no, "
          "IOAccounting=no, TasksAccounting=no). Risk: no resource accounting or limits for "
          "them; check that their mem_cgroup_css_alloc allocations actually drop.",
          fmt::join(named, ", "), fmt::join(edits, "; ")));
    }
    // A fix for the processes in `comms`, if any.
    auto fix_for = [&f](const std::vector<std::string>& comms,
                        fmt::format_string<std::string> text) {
      if (!comms.empty())
        f.fixes.push_back(fmt::format(text, fmt::format("{}", fmt::join(comms, ", "))));
    };
    fix_for(unitless,
            "Cgroups of no systemd unit: process {} creates them itself (a container runtime, a "
            "script, a test). Find it (pgrep -a <name>) and make it reuse one cgroup, or run it "
            "less often.");
    fix_for(folded,
            "Cgroups of more units than labels.unit keeps (folded into \"other\"), created by "
            "{}: many distinct units, such as transient systemd-run scopes. Raise labels.unit to "
            "name them.");
    f.fixes.push_back(
        "For a container runtime (containerd, runc, crio): a container in a crash loop; fix it "
        "or raise its restart back-off.");
  } else if (growing) {
    f.summary = fmt::format("Percpu grows {}/s with no churning unit in sight", Bytes(growth));
    f.fixes.push_back(
        "Look at the kernel functions above: mem_cgroup_css_alloc means cgroup churn (watch "
        "longer: kpathd diagnose --duration 2m), alloc_vfsmnt mount churn, mm_init or "
        "futex_hash_allocate process churn, bpf_map_alloc_percpu an agent's per-CPU BPF maps.");
  } else {
    f.summary = fmt::format("{} {} cgroups removed but still held by the kernel", Count(*dying),
                            controller);
  }
  if (piling) {
    f.fixes.push_back(
        "Dying cgroups go once the page cache charged to them is reclaimed; echo 1 > "
        "/proc/sys/vm/drop_caches does it at once. Risk: the whole host loses its page cache and "
        "rereads from disk; do it off-peak.");
  }
  f.fixes.push_back(
      "Percpu does not shrink after the fix (the allocator keeps its high-water mark): the "
      "acceptance is that it stops growing. Only a reboot returns what is held.");
}

}  // namespace kpath::diagnose
