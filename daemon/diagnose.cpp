#include "daemon/diagnose.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "daemon/collector_set.h"
#include "daemon/daemon.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/collect/human_units.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

using Labels = std::map<std::string, std::string>;

struct Sample {
  Labels labels;
  double value = 0;
};

// The samples of a collection by metric name; histograms are left out (diagnose reads their
// companion counters and gauges).
class Samples {
 public:
  explicit Samples(const MetricFamilies& families) {
    for (const prometheus::MetricFamily& f : families) {
      if (f.type == prometheus::MetricType::Histogram ||
          f.type == prometheus::MetricType::Summary) {
        continue;
      }
      std::vector<Sample>& out = by_name_[f.name];
      for (const prometheus::ClientMetric& m : f.metric) {
        Sample s;
        for (const auto& l : m.label) s.labels[l.name] = l.value;
        switch (f.type) {
          case prometheus::MetricType::Counter:
            s.value = m.counter.value;
            break;
          case prometheus::MetricType::Gauge:
            s.value = m.gauge.value;
            break;
          default:
            s.value = m.untyped.value;
            break;
        }
        out.push_back(std::move(s));
      }
    }
  }

  bool Has(const std::string& name) const { return by_name_.count(name) != 0; }

  const std::vector<Sample>& Get(const std::string& name) const {
    static const std::vector<Sample> kNone;
    auto it = by_name_.find(name);
    return it == by_name_.end() ? kNone : it->second;
  }

  // The first sample whose labels include every pair of `match`.
  std::optional<double> Value(const std::string& name, const Labels& match = {}) const {
    for (const Sample& s : Get(name))
      if (Matches(s.labels, match)) return s.value;
    return std::nullopt;
  }

  static bool Matches(const Labels& labels, const Labels& match) {
    for (const auto& [k, v] : match) {
      auto it = labels.find(k);
      if (it == labels.end() || it->second != v) return false;
    }
    return true;
  }

 private:
  std::map<std::string, std::vector<Sample>> by_name_;
};

using Key = std::vector<std::string>;

Key KeyOf(const Labels& labels, const std::vector<std::string>& keys) {
  Key k;
  for (const std::string& name : keys) {
    auto it = labels.find(name);
    k.push_back(it == labels.end() ? "" : it->second);
  }
  return k;
}

// Sum of `name` by the values of `keys`, over samples that `keep` accepts.
template <typename Keep>
std::map<Key, double> SumBy(const Samples& samples, const std::string& name,
                            const std::vector<std::string>& keys, Keep keep) {
  std::map<Key, double> out;
  for (const Sample& s : samples.Get(name))
    if (keep(s.labels)) out[KeyOf(s.labels, keys)] += s.value;
  return out;
}

std::map<Key, double> SumBy(const Samples& samples, const std::string& name,
                            const std::vector<std::string>& keys) {
  return SumBy(samples, name, keys, [](const Labels&) { return true; });
}

// How much each group grew between two collections (counters start at 0 when a probe attaches,
// so a group missing at the start counts from 0).
std::map<Key, double> Growth(const std::map<Key, double>& first,
                             const std::map<Key, double>& last) {
  std::map<Key, double> out;
  for (const auto& [k, v] : last) {
    auto it = first.find(k);
    out[k] = v - (it == first.end() ? 0 : it->second);
  }
  return out;
}

double Total(const std::map<Key, double>& groups) {
  double t = 0;
  for (const auto& [k, v] : groups) t += v;
  return t;
}

// The groups with the largest positive values, largest first.
std::vector<std::pair<Key, double>> Top(const std::map<Key, double>& groups, size_t n) {
  std::vector<std::pair<Key, double>> v;
  for (const auto& [k, value] : groups)
    if (value > 0) v.emplace_back(k, value);
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > n) v.resize(n);
  return v;
}

std::string Bytes(double b) { return FormatBytesIEC(b); }

std::string Seconds(double s) {
  if (s >= 1) return fmt::format("{:.1f} s", s);
  if (s >= 0.001) return fmt::format("{:.0f} ms", s * 1e3);
  return fmt::format("{:.0f} us", s * 1e6);
}

std::string Rate(double per_second) {
  if (per_second >= 100) return fmt::format("{:.0f}/s", per_second);
  if (per_second >= 1) return fmt::format("{:.1f}/s", per_second);
  return fmt::format("{:.2f}/s", per_second);
}

std::string Count(double n) { return fmt::format("{:.0f}", n); }

// Whether `metric`{probe} is positive.
bool ProbeFlag(const Samples& s, const std::string& metric, const std::string& probe) {
  for (const Sample& p : s.Get(metric))
    if (p.labels.count("probe") && p.labels.at("probe") == probe && p.value > 0) return true;
  return false;
}

bool ProbeAttached(const Samples& s, const std::string& probe) {
  return ProbeFlag(s, "kpath_probe_attached", probe);
}

std::string NotAttached(const Samples& s, const std::string& probe) {
  if (ProbeFlag(s, "kpath_probe_excluded_by_config", probe)) {
    return fmt::format(
        "not checked: probe {} is off by configuration (this kernel offers only a mechanism "
        "left out of the defaults for its cost; probes.{}.mechanisms in kpathd.yaml can add it)",
        probe, probe);
  }
  return fmt::format(
      "not checked: probe {} is not attached (kpathd's log at --log-level info says why)", probe);
}

// --- seed 000 -------------------------------------------------------------------------------

Finding PercpuAndChurn(const Observation& o, const Samples& first, const Samples& last,
                       const DiagnoseThresholds& t) {
  Finding f;
  f.id = "percpu_cgroup_churn";
  f.title = "Percpu memory growth and cgroup churn";
  f.seeds = "seed 000";
  f.runbooks = {"KpathCgroupChurnHigh", "KpathPercpuGrowing", "KpathDyingCgroupsPilingUp"};
  const double secs = std::max(o.elapsed_seconds, 1e-3);

  std::optional<double> p0 = first.Value("kpath_percpu_bytes");
  std::optional<double> p1 = last.Value("kpath_percpu_bytes");
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
  auto made = Growth(SumBy(first, "kpath_cgroup_mkdir_total", {"unit", "comm"}),
                     SumBy(last, "kpath_cgroup_mkdir_total", {"unit", "comm"}));
  auto removed = Growth(SumBy(first, "kpath_cgroup_rmdir_total", {"unit", "comm"}),
                        SumBy(last, "kpath_cgroup_rmdir_total", {"unit", "comm"}));
  std::vector<std::pair<Key, double>> churning;
  for (const auto& [key, n] : Top(made, 5)) {
    double rm = removed.count(key) ? removed.at(key) : 0;
    bool churns = n >= t.cgroup_creations_min && n / secs >= t.cgroup_creations_per_second;
    if (churns) churning.emplace_back(key, n);
    f.evidence.push_back(fmt::format(
        "cgroups created for unit {} by process {}: {} ({}), {} "
        "removed{}",
        key[0], key[1], Count(n), Rate(n / secs), Count(rm), churns ? "  <- churn" : ""));
    f.culprits.push_back(Culprit{{{"unit", key[0]}, {"comm", key[1]}}, n, "cgroups created"});
  }
  bool churn_probe = ProbeAttached(last, "cgroup_churn");
  if (!churn_probe) {
    f.evidence.push_back("cgroup creations: " + NotAttached(last, "cgroup_churn"));
  } else if (made.empty() || Total(made) == 0) {
    f.evidence.push_back("no cgroup was created while watching");
  }

  // Per-CPU allocations by process and kernel function.
  auto bytes = Growth(SumBy(first, "kpath_percpu_alloc_bytes_total", {"comm", "caller"}),
                      SumBy(last, "kpath_percpu_alloc_bytes_total", {"comm", "caller"}));
  auto allocs = Growth(SumBy(first, "kpath_percpu_allocs_total", {"comm", "caller"}),
                       SumBy(last, "kpath_percpu_allocs_total", {"comm", "caller"}));
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
  if (!ProbeAttached(last, "percpu_alloc")) {
    f.evidence.push_back("per-CPU allocations: " + NotAttached(last, "percpu_alloc"));
  }

  // What stays allocated.
  auto held = Growth(SumBy(first, "kpath_percpu_outstanding_bytes", {"caller"}),
                     SumBy(last, "kpath_percpu_outstanding_bytes", {"caller"}));
  for (const auto& [key, n] : Top(held, 3)) {
    f.evidence.push_back(
        fmt::format("still allocated at the end, kernel function {}: +{}", key[0], Bytes(n)));
  }

  // Live and dying memory cgroups (cgroup2's totals when the kernel has no per-controller ones).
  std::string controller =
      last.Value("kpath_cgroups", {{"controller", "memory"}}) ? "memory" : "cgroup2";
  std::optional<double> live =
      last.Value("kpath_cgroups", {{"controller", controller}, {"state", "live"}});
  std::optional<double> dying =
      last.Value("kpath_cgroups", {{"controller", controller}, {"state", "dying"}});
  std::optional<double> dying0 =
      first.Value("kpath_cgroups", {{"controller", controller}, {"state", "dying"}});
  bool piling = false;
  if (live && dying) {
    piling = *dying > t.dying_memory_cgroups && *dying > 2 * *live;
    f.evidence.push_back(fmt::format(
        "{} cgroups: {} live, {} dying ({}{} while watching){}", controller, Count(*live),
        Count(*dying), dying0 && *dying >= *dying0 ? "+" : "",
        dying0 ? Count(*dying - *dying0) : "?", piling ? "  <- removed but still held" : ""));
  }

  bool growing = p0 && p1 && o.elapsed_seconds >= t.percpu_growth_min_seconds &&
                 growth >= t.percpu_growth_bytes_per_second;
  if (churning.empty() && !growing && !piling) {
    f.state = Finding::State::kOk;
    f.summary = churn_probe ? fmt::format("no unit churns cgroups; Percpu {}{}/s",
                                          growth >= 0 ? "+" : "", Bytes(growth))
                            : fmt::format("Percpu {}{}/s; cgroup churn not checked",
                                          growth >= 0 ? "+" : "", Bytes(growth));
    return f;
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
    f.summary = fmt::format("{} in {}{}", fmt::join(units, "; "), Seconds(o.elapsed_seconds),
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
    if (!unitless.empty()) {
      f.fixes.push_back(fmt::format(
          "Cgroups of no systemd unit: process {} creates them itself (a container runtime, a "
          "script, a test). Find it (pgrep -a <name>) and make it reuse one cgroup, or run it "
          "less often.",
          fmt::join(unitless, ", ")));
    }
    if (!folded.empty()) {
      f.fixes.push_back(fmt::format(
          "Cgroups of more units than labels.unit keeps (folded into \"other\"), created by "
          "{}: many distinct units, such as transient systemd-run scopes. Raise labels.unit to "
          "name them.",
          fmt::join(folded, ", ")));
    }
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
  return f;
}

// --- seeds 001 and 004 ------------------------------------------------------------------------

bool SlabinfoCulprit(const std::string& culprit) {
  for (std::string_view s : {"slab", "count_partial", "s_show", "s_next"})
    if (culprit.find(s) != std::string::npos) return true;
  return false;
}

Finding IrqOff(const Observation& o, const Samples& first, const Samples& last) {
  Finding f;
  f.id = "irqoff";
  f.title = "IRQ-disabled regions";
  f.seeds = "seeds 001, 004";
  f.runbooks = {"KpathIrqOffLong"};
  if (!ProbeAttached(last, "irqoff")) {
    f.state = Finding::State::kNotChecked;
    f.summary = NotAttached(last, "irqoff");
    return f;
  }
  double threshold = last.Value("kpath_irqoff_threshold_seconds").value_or(0.01);
  auto regions = Growth(SumBy(first, "kpath_irqoff_regions_total", {"comm", "culprit"}),
                        SumBy(last, "kpath_irqoff_regions_total", {"comm", "culprit"}));
  double total = Total(regions);
  if (total < 1) {
    f.state = Finding::State::kOk;
    f.summary = fmt::format("no region of {} or more", Seconds(threshold));
    return f;
  }
  f.state = Finding::State::kFound;
  auto top = Top(regions, 5);
  f.summary = fmt::format(
      "{} region{} of {} or more with interrupts disabled, the longest {}; "
      "most under process {} in kernel function {}",
      Count(total), total == 1 ? "" : "s", Seconds(threshold), Seconds(o.irqoff_max_seconds),
      top.front().first[0], top.front().first[1]);
  bool slabinfo = false;
  for (const auto& [key, n] : top) {
    f.evidence.push_back(fmt::format("process {}, kernel function {}: {} region{}", key[0], key[1],
                                     Count(n), n == 1 ? "" : "s"));
    f.culprits.push_back(Culprit{{{"comm", key[0]}, {"culprit", key[1]}}, n, "regions"});
    slabinfo = slabinfo || SlabinfoCulprit(key[1]);
  }
  f.evidence.push_back(fmt::format("longest region: {}", Seconds(o.irqoff_max_seconds)));
  if (slabinfo) {
    f.runbooks.push_back("KpathSlabinfoReadWithLargeSlab");
    f.fixes.push_back(
        "The culprit walks the slab caches for /proc/slabinfo: stop the periodic reader, use "
        "ss without -p, or a newer ss that does not read /proc/slabinfo (iproute2 commit "
        "10f687736b8d). Risk: the monitoring loses process names of sockets.");
    f.fixes.push_back(
        "Shrink the caches once with echo 2 > /proc/sys/vm/drop_caches. Risk: the drop stalls "
        "the host for seconds to minutes; only off-peak.");
  }
  f.fixes.push_back(
      "A driver or kernel lock holding IRQs off (seed 004: spin_lock_irqsave in a driver, fixed "
      "with spin_lock_bh: 369 us -> 47 us): a kernel fix from the vendor. Meanwhile move "
      "latency-sensitive IRQs and RPS off that CPU (/proc/irq/N/smp_affinity, rps_cpus). Risk: "
      "other CPUs take that load.");
  return f;
}

Finding SlabinfoReaders(const Observation& o, const Samples& first, const Samples& last,
                        const DiagnoseThresholds& t) {
  Finding f;
  f.id = "slabinfo_readers";
  f.title = "/proc/slabinfo readers and large slab caches";
  f.seeds = "seed 001";
  f.runbooks = {"KpathSlabinfoReadWithLargeSlab"};
  std::string largest;
  double largest_objects = 0;
  for (const Sample& s : last.Get("kpath_slab_objects")) {
    if (s.value > largest_objects) {
      largest_objects = s.value;
      largest = s.labels.count("cache") ? s.labels.at("cache") : "?";
    }
  }
  if (!largest.empty()) {
    f.evidence.push_back(
        fmt::format("largest slab cache: {} with {} objects", largest, Count(largest_objects)));
  }
  if (!ProbeAttached(last, "slabinfo_readers")) {
    f.state = Finding::State::kNotChecked;
    f.summary = NotAttached(last, "slabinfo_readers");
    return f;
  }
  auto reads = Growth(SumBy(first, "kpath_slabinfo_reads_total", {"comm"}),
                      SumBy(last, "kpath_slabinfo_reads_total", {"comm"}));
  for (const auto& [key, n] : Top(reads, 5)) {
    f.evidence.push_back(
        fmt::format("process {} opened /proc/slabinfo {} times", key[0], Count(n)));
    f.culprits.push_back(Culprit{{{"comm", key[0]}}, n, "opens"});
  }
  double total = Total(reads);
  if (total < 1 || largest_objects < t.slab_objects_large) {
    f.state = Finding::State::kOk;
    f.summary = total < 1 ? "nobody read /proc/slabinfo"
                          : fmt::format(
                                "/proc/slabinfo read {} times, but the slab caches are "
                                "small (each read is short)",
                                Count(total));
    return f;
  }
  f.state = Finding::State::kFound;
  f.summary = fmt::format(
      "{} reads /proc/slabinfo ({} times in {}) while {} holds {} objects: "
      "each read walks them with IRQs off",
      Top(reads, 1).front().first[0], Count(total), Seconds(o.elapsed_seconds), largest,
      Count(largest_objects));
  f.fixes.push_back(
      "Stop the periodic ss -p (or whatever reads /proc/slabinfo), drop -p, or upgrade "
      "iproute2: newer ss does not read /proc/slabinfo. Risk: the monitoring loses the "
      "process names of sockets.");
  f.fixes.push_back(
      "Readers that need slab numbers: read /sys/kernel/slab/<cache>/objects instead, as kpathd "
      "does.");
  f.fixes.push_back(
      "Shrink the caches once: echo 2 > /proc/sys/vm/drop_caches. Risk: the drop stalls the "
      "host for seconds to minutes; they grow back if /proc scanning goes on.");
  return f;
}

// --- seed 002 ---------------------------------------------------------------------------------

Finding ForeignHooks(const Observation& o, const Samples& first, const Samples& last,
                     const DiagnoseThresholds& t) {
  Finding f;
  f.id = "foreign_hooks";
  f.title = "Kernel hooks of other software";
  f.seeds = "seed 002";
  f.runbooks = {"KpathForeignHookOnHotFunction", "KpathForeignBpfCpuHigh"};
  if (!last.Has("kpath_foreign_hooks")) {
    f.state = Finding::State::kNotChecked;
    f.summary = "not checked: the foreign-hook inventory is off (hooks.enabled) or failing";
    return f;
  }
  const double secs = std::max(o.elapsed_seconds, 1e-3);
  double all = 0;
  for (const Sample& s : last.Get("kpath_foreign_hooks")) all += s.value;
  double hidden = last.Value("kpath_hidden_kprobes").value_or(0);
  f.evidence.push_back(
      fmt::format("{} foreign hooks, {} of them kprobes or kretprobes", Count(all), Count(hidden)));
  // Hot hooks by owner, with their targets.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> hot;
  std::map<std::pair<std::string, std::string>, double> hot_count;
  for (const Sample& s : last.Get("kpath_foreign_hook_info")) {
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
  auto cpu = Growth(SumBy(first, "kpath_foreign_bpf_run_seconds_total", {"owner"}),
                    SumBy(last, "kpath_foreign_bpf_run_seconds_total", {"owner"}));
  std::vector<std::string> costly;
  for (const auto& [key, s] : Top(cpu, 5)) {
    double cpus = s / secs;
    f.evidence.push_back(
        fmt::format("BPF programs of {} ran {:.3f} CPU-seconds per second", key[0], cpus));
    f.culprits.push_back(Culprit{{{"owner", key[0]}}, cpus, "CPU-seconds per second"});
    if (cpus >= t.foreign_bpf_cpus) costly.push_back(key[0]);
  }
  if (hot.empty() && costly.empty()) {
    f.state = Finding::State::kOk;
    f.summary =
        fmt::format("no foreign hook on a hot function ({} foreign hooks elsewhere)", Count(all));
    return f;
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
  return f;
}

// --- seed 003 ---------------------------------------------------------------------------------

Finding MadviseTlb(const Observation& o, const Samples& first, const Samples& last,
                   const DiagnoseThresholds& t) {
  Finding f;
  f.id = "madvise_tlb";
  f.title = "madvise storms and TLB shootdowns";
  f.seeds = "seed 003";
  f.runbooks = {"KpathMadviseStorm", "KpathTlbShootdownStorm"};
  const double secs = std::max(o.elapsed_seconds, 1e-3);
  const int cpus = std::max(o.cpus, 1);

  auto cpu = Growth(SumBy(first, "kpath_cpu_seconds_total", {"mode"}),
                    SumBy(last, "kpath_cpu_seconds_total", {"mode"}));
  double user = cpu.count({"user"}) ? cpu.at({"user"}) : 0;
  double system = cpu.count({"system"}) ? cpu.at({"system"}) : 0;
  if (user + system > 0) {
    f.evidence.push_back(fmt::format("CPU: {:.0f}% user, {:.0f}% system (of {} CPUs)",
                                     100 * user / secs / cpus, 100 * system / secs / cpus, cpus));
  }
  std::optional<double> s0 = first.Value("kpath_tlb_shootdowns_total");
  std::optional<double> s1 = last.Value("kpath_tlb_shootdowns_total");
  double shootdowns = s0 && s1 ? (*s1 - *s0) / secs / cpus : 0;
  if (s0 && s1) {
    f.evidence.push_back(fmt::format("TLB shootdowns: {} per CPU", Rate(shootdowns)));
  }
  std::vector<std::string> storms;
  bool madvise_probe = ProbeAttached(last, "madvise");
  if (madvise_probe) {
    auto returning = [](const Labels& l) {
      return l.count("advice") && (l.at("advice") == "dontneed" || l.at("advice") == "free");
    };
    auto calls = Growth(SumBy(first, "kpath_madvise_calls_total", {"comm"}, returning),
                        SumBy(last, "kpath_madvise_calls_total", {"comm"}, returning));
    auto bytes = Growth(SumBy(first, "kpath_madvise_bytes_total", {"comm"}, returning),
                        SumBy(last, "kpath_madvise_bytes_total", {"comm"}, returning));
    for (const auto& [key, n] : Top(calls, 5)) {
      double rate = n / secs;
      f.evidence.push_back(
          fmt::format("process {} returned memory with MADV_DONTNEED/MADV_FREE {} ({}/s)", key[0],
                      Rate(rate), Bytes((bytes.count(key) ? bytes.at(key) : 0) / secs)));
      f.culprits.push_back(Culprit{{{"comm", key[0]}}, rate, "madvise calls/s"});
      if (rate >= t.madvise_calls_per_second) storms.push_back(key[0]);
    }
  } else {
    f.evidence.push_back("madvise calls: " + NotAttached(last, "madvise"));
  }
  bool tlb_storm = shootdowns >= t.tlb_shootdowns_per_cpu_per_second;
  if (storms.empty() && !tlb_storm) {
    f.state = madvise_probe || (s0 && s1) ? Finding::State::kOk : Finding::State::kNotChecked;
    f.summary = fmt::format("no madvise storm; {} TLB shootdowns per CPU", Rate(shootdowns));
    return f;
  }
  f.state = Finding::State::kFound;
  f.summary = storms.empty()
                  ? fmt::format("{} TLB shootdowns per CPU, without a madvise storm behind them",
                                Rate(shootdowns))
                  : fmt::format(
                        "{} returns memory to the kernel in a storm of madvise calls; "
                        "{} TLB shootdowns per CPU",
                        fmt::join(storms, ", "), Rate(shootdowns));
  if (!storms.empty()) {
    f.fixes.push_back(
        "Go: pool the large short-lived allocations (sync.Pool) so fewer GCs return memory. "
        "Risk: a code change; pooled objects must be reset before reuse.");
    f.fixes.push_back(
        "Go 1.19+: GOMEMLIMIT (about 80% of the container limit) with a higher GOGC (e.g. 400): "
        "seed 003 cut madvise 90% and system CPU from 50% to 5%. Risk: more steady memory; too "
        "close to the limit and the GC thrashes.");
    f.fixes.push_back(
        "Other allocators: return memory less eagerly (jemalloc dirty_decay_ms, glibc "
        "M_TRIM_THRESHOLD, JVM heap uncommit delays).");
  } else {
    f.fixes.push_back(
        "Without a madvise storm: check automatic NUMA balancing, KSM, THP compaction, or a "
        "process that maps and unmaps in a loop (perf record -e tlb:tlb_flush -ag). Each "
        "setting affects the whole host: change it on one node first.");
  }
  return f;
}

std::string StateWord(Finding::State s) {
  switch (s) {
    case Finding::State::kFound:
      return "found";
    case Finding::State::kOk:
      return "ok";
    case Finding::State::kNotChecked:
      return "not_checked";
  }
  return "?";
}

std::string Json(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Json(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

std::string Json(const std::vector<std::string>& v) {
  std::vector<std::string> items;
  for (const std::string& s : v) items.push_back(Json(std::string_view(s)));
  return fmt::format("[{}]", fmt::join(items, ","));
}

}  // namespace

bool Diagnosis::AnythingFound() const {
  for (const Finding& f : findings)
    if (f.state == Finding::State::kFound) return true;
  return false;
}

Diagnosis Diagnose(const Observation& o, const DiagnoseThresholds& t) {
  Samples first(o.first);
  Samples last(o.last);
  Diagnosis d;
  d.elapsed_seconds = o.elapsed_seconds;
  d.interrupted = o.interrupted;
  d.cpus = o.cpus;
  for (const Sample& s : last.Get("kpath_probe_attached")) {
    d.probes.push_back(ProbeStatus{s.labels.count("probe") ? s.labels.at("probe") : "?",
                                   s.labels.count("mechanism") ? s.labels.at("mechanism") : "?",
                                   s.value > 0});
  }
  for (const Sample& s : last.Get("kpath_collector_success"))
    if (s.value == 0 && s.labels.count("collector"))
      d.failing_collectors.push_back(s.labels.at("collector"));
  d.findings.push_back(PercpuAndChurn(o, first, last, t));
  d.findings.push_back(IrqOff(o, first, last));
  d.findings.push_back(SlabinfoReaders(o, first, last, t));
  d.findings.push_back(ForeignHooks(o, first, last, t));
  d.findings.push_back(MadviseTlb(o, first, last, t));
  return d;
}

std::string RenderText(const Diagnosis& d) {
  std::string out;
  out += fmt::format("kpathd diagnose: watched this host for {}{} (Linux {}, {} CPUs).\n",
                     Seconds(d.elapsed_seconds), d.interrupted ? ", stopped early" : "",
                     d.kernel_release.empty() ? "?" : d.kernel_release, d.cpus);
  std::vector<std::string> attached, missing;
  for (const ProbeStatus& p : d.probes) {
    if (p.attached) {
      attached.push_back(fmt::format("{} ({})", p.probe, p.mechanism));
    } else {
      missing.push_back(p.probe);
    }
  }
  out += fmt::format("Probes attached: {} of {}{}{}.\n", attached.size(), d.probes.size(),
                     attached.empty() ? "" : ": ", fmt::join(attached, ", "));
  if (!missing.empty()) {
    out += fmt::format(
        "Not attached: {} (run as root; kpathd's log at --log-level info says "
        "why).\n",
        fmt::join(missing, ", "));
  }
  if (!d.failing_collectors.empty()) {
    out += fmt::format("Failing collectors: {}.\n", fmt::join(d.failing_collectors, ", "));
  }
  std::vector<std::string> found;
  for (const Finding& f : d.findings) {
    const char* word = f.state == Finding::State::kFound ? "FOUND"
                       : f.state == Finding::State::kOk  ? "ok"
                                                         : "n/a";
    out += fmt::format("\n{:<6} {} ({}): {}\n", word, f.title, f.seeds, f.summary);
    if (f.state == Finding::State::kFound) found.push_back(f.title);
    for (const std::string& e : f.evidence) out += fmt::format("         - {}\n", e);
    if (f.state == Finding::State::kFound) {
      out += fmt::format("       What to do (runbooks: {}):\n", fmt::join(f.runbooks, ", "));
      for (const std::string& fix : f.fixes) out += fmt::format("         * {}\n", fix);
    }
  }
  out += found.empty() ? fmt::format("\nNothing found in {}.\n", Seconds(d.elapsed_seconds))
                       : fmt::format("\nFound: {}.\n", fmt::join(found, "; "));
  out += "Runbooks: docs/runbooks/<name>.md (installed in /usr/share/doc/kpathd/runbooks/).\n";
  return out;
}

std::string RenderJson(const Diagnosis& d) {
  std::vector<std::string> probes;
  for (const ProbeStatus& p : d.probes) {
    probes.push_back(fmt::format(R"({{"probe":{},"mechanism":{},"attached":{}}})",
                                 Json(std::string_view(p.probe)),
                                 Json(std::string_view(p.mechanism)), p.attached));
  }
  std::vector<std::string> findings;
  for (const Finding& f : d.findings) {
    std::vector<std::string> culprits;
    for (const Culprit& c : f.culprits) {
      std::vector<std::string> labels;
      for (const auto& [k, v] : c.labels)
        labels.push_back(
            fmt::format("{}:{}", Json(std::string_view(k)), Json(std::string_view(v))));
      culprits.push_back(fmt::format(R"({{"labels":{{{}}},"value":{},"unit":{}}})",
                                     fmt::join(labels, ","), Json(c.value),
                                     Json(std::string_view(c.unit))));
    }
    findings.push_back(fmt::format(
        R"({{"id":{},"title":{},"seeds":{},"state":{},"summary":{},"evidence":{},"culprits":[{}],"fixes":{},"runbooks":{}}})",
        Json(std::string_view(f.id)), Json(std::string_view(f.title)),
        Json(std::string_view(f.seeds)), Json(std::string_view(StateWord(f.state))),
        Json(std::string_view(f.summary)), Json(f.evidence), fmt::join(culprits, ","),
        Json(f.fixes), Json(f.runbooks)));
  }
  return fmt::format(
      R"({{"found":{},"elapsed_seconds":{},"interrupted":{},"kernel_release":{},"cpus":{},"probes":[{}],"failing_collectors":{},"findings":[{}]}})"
      "\n",
      d.AnythingFound(), Json(d.elapsed_seconds), d.interrupted,
      Json(std::string_view(d.kernel_release)), d.cpus, fmt::join(probes, ","),
      Json(d.failing_collectors), fmt::join(findings, ","));
}

int RunDiagnose(const CliOptions& cli, Config config) {
  // The report is the output; probe attachment lines are for --log-level info.
  if (!cli.log_level) (void)ConfigureLogging("warn");
  if (geteuid() != 0) {
    std::fprintf(stderr,
                 "kpathd diagnose: not running as root: BPF probes will not attach and most "
                 "pathologies cannot be checked.\n");
  }
  using Clock = std::chrono::steady_clock;
  const bool tty = isatty(STDERR_FILENO) == 1;
  Daemon daemon(cli, config);
  std::unique_ptr<CollectorSet> collectors = daemon.BuildCollectors();
  collectors->StartAll();

  Observation o;
  o.cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const Clock::time_point start = Clock::now();
  o.first = collectors->CollectAll();
  auto irqoff_max = [](const MetricFamilies& families) {
    return Samples(families).Value("kpath_irqoff_max_seconds").value_or(0);
  };
  o.irqoff_max_seconds = irqoff_max(o.first);
  const Samples first(o.first);
  const double first_percpu = first.Value("kpath_percpu_bytes").value_or(0);
  const double first_mkdirs = Total(SumBy(first, "kpath_cgroup_mkdir_total", {}));

  const auto duration =
      std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(cli.diagnose_duration));
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  MetricFamilies latest = o.first;
  for (;;) {
    Clock::duration left = duration - (Clock::now() - start);
    if (left <= Clock::duration::zero()) break;
    Clock::duration step = std::min<Clock::duration>(left, std::chrono::seconds(1));
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(std::chrono::duration_cast<std::chrono::seconds>(step).count());
    ts.tv_nsec = static_cast<long>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(step % std::chrono::seconds(1))
            .count());
    int sig = sigtimedwait(&stop, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      o.interrupted = true;
    }
    latest = collectors->CollectAll();
    o.irqoff_max_seconds = std::max(o.irqoff_max_seconds, irqoff_max(latest));
    if (o.interrupted) break;
    if (tty) {
      Samples now(latest);
      double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      double percpu = now.Value("kpath_percpu_bytes").value_or(0) - first_percpu;
      double mkdirs = Total(SumBy(now, "kpath_cgroup_mkdir_total", {})) - first_mkdirs;
      std::fprintf(stderr,
                   "\r\033[Kkpathd diagnose: %.0f of %.0f s, %d/%d probes attached; "
                   "Percpu %s%s, %.0f cgroups created (Ctrl-C: report now)",
                   elapsed, absl::ToDoubleSeconds(cli.diagnose_duration),
                   collectors->ProbesAttached(), collectors->ProbesTotal(), percpu >= 0 ? "+" : "",
                   Bytes(percpu).c_str(), mkdirs);
      std::fflush(stderr);
    }
  }
  if (tty) std::fputs("\r\033[K", stderr);
  o.last = std::move(latest);
  o.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  collectors->StopAll();
  collectors.reset();

  Diagnosis d = Diagnose(o);
  d.kernel_release = BuildInfo::Current().kernel_release;
  std::string report = cli.diagnose_json ? RenderJson(d) : RenderText(d);
  std::fwrite(report.data(), 1, report.size(), stdout);
  std::fflush(stdout);
  return d.AnythingFound() ? 1 : 0;
}

}  // namespace kpath
