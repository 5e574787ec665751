#include "daemon/collector_set.h"

#include <bpf/libbpf.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "daemon/build_info.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/collect/bpf_program_stats.h"
#include "probes/collect/health_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

BuildInfo BuildInfo::Current() {
  BuildInfo b;
  b.version = kVersion;
  b.revision = kRevision;
  b.libbpf_version = fmt::format("{}.{}", libbpf_major_version(), libbpf_minor_version());
  struct utsname u;
  b.kernel_release = uname(&u) == 0 ? u.release : "unknown";
  return b;
}

CollectorSet::CollectorSet(std::vector<std::unique_ptr<Collector>> collectors, BuildInfo build,
                           HostPaths paths)
    : collectors_(std::move(collectors)),
      health_(collectors_.size()),
      build_(std::move(build)),
      paths_(std::move(paths)) {}

CollectorSet::~CollectorSet() { StopAll(); }

void CollectorSet::StartAll() {
  for (size_t i = 0; i < collectors_.size(); ++i) StartOne(i);
}

void CollectorSet::StartOne(size_t i) {
  Collector& c = *collectors_[i];
  Health& h = health_[i];
  const bool retry = h.start_attempts > 0;
  ++h.start_attempts;
  absl::Status s;
  try {
    s = c.Start();
  } catch (const std::exception& e) {
    s = absl::InternalError(fmt::format("exception: {}", e.what()));
  }
  h.started = s.ok();
  h.consecutive_failures = 0;
  if (s.ok()) {
    h.backoff = std::chrono::milliseconds(0);
    if (retry) spdlog::info("collector {}: started on attempt {}", c.Name(), h.start_attempts);
    return;
  }
  const std::string error(s.message());
  if (!Retryable(c)) {
    h.last_error = error;
    spdlog::warn("collector {}: start failed, it reports kpath_collector_success 0: {}", c.Name(),
                 error);
    return;
  }
  h.backoff = h.backoff.count() == 0 ? retry_.initial : std::min(h.backoff * 2, retry_.max);
  h.next_start = std::chrono::steady_clock::now() + h.backoff;
  // Warn on the first failure and when the reason changes; quieter while it stays the same.
  if (!retry || error != h.last_error) {
    spdlog::warn(
        "collector {}: start failed, it reports kpath_collector_success 0 and is retried in {} "
        "ms: {}",
        c.Name(), h.backoff.count(), error);
  } else {
    spdlog::debug("collector {}: attempt {} failed, next in {} ms: {}", c.Name(), h.start_attempts,
                  h.backoff.count(), error);
  }
  h.last_error = error;
}

MetricFamilies CollectorSet::CollectAll() {
  MetricFamilies out;
  for (size_t i = 0; i < collectors_.size(); ++i) {
    Collector& c = *collectors_[i];
    Health& h = health_[i];
    MetricFamilies mine;
    auto begin = std::chrono::steady_clock::now();
    if (!h.started && Retryable(c) && h.start_attempts > 0 &&
        std::chrono::steady_clock::now() >= h.next_start) {
      StartOne(i);
    }
    absl::Status s;
    if (!h.started) {
      s = absl::FailedPreconditionError(h.last_error);
    } else if (AllProbesExcludedByConfig(c)) {
      // Off by choice: nothing to read, nothing wrong.
    } else {
      try {
        s = c.Collect(mine);
      } catch (const std::exception& e) {
        s = absl::InternalError(fmt::format("exception: {}", e.what()));
      }
    }
    h.duration_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    bool was_ok = h.ok || !h.ever_collected;
    h.ok = s.ok();
    h.ever_collected = true;
    if (s.ok()) {
      if (!was_ok) spdlog::info("collector {}: collecting again", c.Name());
      for (auto& f : mine) out.push_back(std::move(f));
    } else {
      // Log on the transition only: a collector failing every interval logs once.
      if (h.started && (was_ok || h.last_error != std::string(s.message()))) {
        spdlog::warn("collector {}: collection failed: {}", c.Name(), std::string(s.message()));
      }
      h.last_error = std::string(s.message());
      // A started probe that keeps failing is re-attached: Start replaces what it holds.
      if (h.started && Retryable(c) && ++h.consecutive_failures >= retry_.failures_before_restart) {
        spdlog::warn("collector {}: {} collections failed in a row; re-attaching its probes",
                     c.Name(), h.consecutive_failures);
        h.started = false;
        h.backoff = std::chrono::milliseconds(0);
        h.next_start = std::chrono::steady_clock::now();
      }
    }
    if (s.ok()) h.consecutive_failures = 0;
    SelfTestOne(i);
  }
  AppendHealth(out);
  return MergeFamiliesByName(std::move(out));
}

void CollectorSet::SelfTestOne(size_t i) {
  Collector& c = *collectors_[i];
  Health& h = health_[i];
  std::vector<ProbeState> probes = c.Probes();
  const bool attached =
      h.started && std::any_of(probes.begin(), probes.end(),
                               [](const ProbeState& p) { return p.mechanism != Mechanism::kNone; });
  if (!attached) {
    h.selftest_ok.reset();  // re-tested at once when it attaches again
    h.next_selftest = {};
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now < h.next_selftest) return;
  h.next_selftest = now + selftest_interval_;
  std::optional<absl::Status> result;
  try {
    result = c.SelfTest();
  } catch (const std::exception& e) {
    result = absl::InternalError(fmt::format("exception: {}", e.what()));
  }
  if (!result) return;
  const bool ok = result->ok();
  const std::string error(result->message());
  // Logged on a change only: a canary failing every minute logs once.
  if (!ok && (h.selftest_ok != false || h.selftest_error != error)) {
    spdlog::warn("probe {}: self-test failed, its counts may be missing events: {}", c.Name(),
                 error);
  } else if (ok && h.selftest_ok == false) {
    spdlog::info("probe {}: self-test passes again", c.Name());
  }
  if (ok) spdlog::debug("probe {}: self-test passed", c.Name());
  h.selftest_ok = ok;
  h.selftest_error = ok ? "" : error;
}

MetricFamilies MergeFamiliesByName(MetricFamilies families) {
  // Families shared by several collectors (kpath_events_lost_total, ...) must appear once in the
  // exposition: a second HELP/TYPE for a name makes the whole scrape invalid.
  MetricFamilies merged;
  std::map<std::string, size_t> index;
  for (auto& f : families) {
    auto [it, inserted] = index.emplace(f.name, merged.size());
    if (inserted) {
      merged.push_back(std::move(f));
    } else {
      auto& into = merged[it->second].metric;
      into.insert(into.end(), std::make_move_iterator(f.metric.begin()),
                  std::make_move_iterator(f.metric.end()));
    }
  }
  return merged;
}

void CollectorSet::AppendHealth(MetricFamilies& out) {
  FamilyBuilder(health_metrics::kBuildInfo)
      .Add({{"version", build_.version},
            {"revision", build_.revision},
            {"libbpf_version", build_.libbpf_version},
            {"kernel_release", build_.kernel_release}},
           1)
      .AppendTo(out);

  FamilyBuilder success(health_metrics::kCollectorSuccess);
  FamilyBuilder duration(health_metrics::kCollectorDurationSeconds);
  FamilyBuilder attached(health_metrics::kProbeAttached);
  FamilyBuilder excluded(health_metrics::kProbeExcludedByConfig);
  FamilyBuilder supported(health_metrics::kProbeSupported);
  FamilyBuilder selftest(health_metrics::kProbeSelfTestSuccess);
  FamilyBuilder run_seconds(health_metrics::kBpfProgramRunSecondsTotal);
  FamilyBuilder runs(health_metrics::kBpfProgramRunsTotal);
  // Also while the foreign-hook inventory holds a BPF_ENABLE_STATS fd (hooks.bpf_stats: always).
  bool stats_on = BpfRunStatsComplete(paths_);
  // Otherwise (hooks.bpf_stats: sampled, the default) its sampler's estimates price them.
  std::map<uint32_t, BpfRunEstimate> estimates = TakeSampledBpfRunEstimates();
  for (size_t i = 0; i < collectors_.size(); ++i) {
    const Collector& c = *collectors_[i];
    std::string name(c.Name());
    success.Add({{"collector", name}}, health_[i].ok ? 1 : 0);
    duration.Add({{"collector", name}}, health_[i].duration_seconds);
    for (const ProbeState& p : c.Probes()) {
      attached.Add({{"probe", p.probe}, {"mechanism", std::string(MechanismName(p.mechanism))}},
                   p.mechanism == Mechanism::kNone ? 0 : 1);
      excluded.Add({{"probe", p.probe}}, p.excluded_by_config ? 1 : 0);
      supported.Add({{"probe", p.probe}}, p.supported ? 1 : 0);
      if (health_[i].selftest_ok && p.mechanism != Mechanism::kNone) {
        selftest.Add({{"probe", p.probe}}, *health_[i].selftest_ok ? 1 : 0);
      }
    }
    for (const OwnBpfProgram& prog : c.Programs()) {
      absl::StatusOr<BpfProgramRunStats> st = ReadBpfProgramRunStats(prog.fd);
      if (!st.ok()) continue;
      const OwnBpfRunCost::Key key{prog.probe, prog.program};
      auto estimate = estimates.find(st->id);
      own_cost_.Update(
          key, *st, stats_on,
          estimate == estimates.end() ? std::nullopt : std::optional(estimate->second));
      std::optional<BpfRunEstimate> total = own_cost_.Total(key);
      if (!total) continue;
      LabelPairs labels{{"probe", prog.probe}, {"program", prog.program}};
      run_seconds.Add(labels, total->run_time_ns / 1e9);
      runs.Add(labels, total->run_count);
    }
  }
  success.AppendTo(out);
  duration.AppendTo(out);
  if (!excluded.empty()) excluded.AppendTo(out);
  if (!attached.empty()) attached.AppendTo(out);
  if (!supported.empty()) supported.AppendTo(out);
  if (!selftest.empty()) selftest.AppendTo(out);
  FamilyBuilder(health_metrics::kBpfStatsEnabled).Add(stats_on ? 1 : 0).AppendTo(out);
  // The end of this collection, on the wall clock Prometheus compares it with (time()).
  FamilyBuilder(health_metrics::kLastSampleTimestampSeconds)
      .Add(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
               .count())
      .AppendTo(out);
  if (!run_seconds.empty()) {
    run_seconds.AppendTo(out);
    runs.AppendTo(out);
  }
}

std::vector<ProbeState> CollectorSet::ProbeStates() const {
  std::vector<ProbeState> states;
  for (const auto& c : collectors_) {
    for (ProbeState& p : c->Probes()) states.push_back(std::move(p));
  }
  return states;
}

int CollectorSet::ProbesAttached() const {
  int n = 0;
  for (const auto& c : collectors_)
    for (const ProbeState& p : c->Probes()) n += p.mechanism != Mechanism::kNone;
  return n;
}

int CollectorSet::ProbesTotal() const {
  int n = 0;
  for (const auto& c : collectors_)
    for (const ProbeState& p : c->Probes()) n += !p.excluded_by_config;
  return n;
}

std::vector<std::string> CollectorSet::ProbesExcludedByConfig() const {
  std::vector<std::string> names;
  for (const auto& c : collectors_)
    for (const ProbeState& p : c->Probes())
      if (p.excluded_by_config) names.push_back(p.probe);
  return names;
}

bool CollectorSet::AllProbesExcludedByConfig(const Collector& c) {
  std::vector<ProbeState> probes = c.Probes();
  return !probes.empty() && std::all_of(probes.begin(), probes.end(),
                                        [](const ProbeState& p) { return p.excluded_by_config; });
}

std::string CollectorSet::StatusLine() const {
  std::vector<std::string> parts;
  std::string attached = fmt::format("{}/{} probes attached", ProbesAttached(), ProbesTotal());
  if (std::vector<std::string> off = ProbesExcludedByConfig(); !off.empty()) {
    attached += fmt::format(" ({} off by configuration)", fmt::join(off, ", "));
  }
  parts.push_back(std::move(attached));
  std::vector<std::string> failing;
  for (size_t i = 0; i < collectors_.size(); ++i) {
    if (!health_[i].ok) failing.emplace_back(collectors_[i]->Name());
    std::string fragment = collectors_[i]->StatusFragment();
    if (!fragment.empty()) parts.push_back(std::move(fragment));
  }
  if (!failing.empty()) {
    parts.push_back(fmt::format("{}{} failing", failing.size() == 1 ? "collector " : "collectors ",
                                fmt::join(failing, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

void CollectorSet::SetEventSink(EventSink* sink) {
  for (auto& c : collectors_) c->SetEventSink(sink);
}

void CollectorSet::SetLabelLimits(const LabelLimits& limits) {
  for (auto& c : collectors_) c->SetLabelLimits(limits);
}

void CollectorSet::ForEach(const std::function<void(Collector&)>& fn) {
  for (auto& c : collectors_) fn(*c);
}

void CollectorSet::StopAll() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& c : collectors_) c->Stop();
}

}  // namespace kpath
