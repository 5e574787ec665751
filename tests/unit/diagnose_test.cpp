// kpathd diagnose's analysis on synthetic collections: the seed numbers give a finding that names
// the culprits and the fix; a healthy host gives none; a missing probe says what was not checked.
#include "daemon/diagnose.h"

#include <catch2/catch.hpp>

#include "probes/collect/metric_families.h"

using namespace kpath;

namespace {

// The health families every collection carries.
void AddProbes(MetricFamilies& out, bool irqoff_attached = true, bool madvise_attached = true) {
  auto attached = Gauge("kpath_probe_attached", "");
  attached.Add({{"probe", "percpu_alloc"}, {"mechanism", "tp_btf"}}, 1);
  attached.Add({{"probe", "cgroup_churn"}, {"mechanism", "tp_btf"}}, 1);
  attached.Add({{"probe", "madvise"}, {"mechanism", madvise_attached ? "tracepoint" : "none"}},
               madvise_attached ? 1 : 0);
  attached.Add({{"probe", "slabinfo_readers"}, {"mechanism", "tracepoint"}}, 1);
  attached.Add({{"probe", "irqoff"}, {"mechanism", irqoff_attached ? "perf_event" : "none"}},
               irqoff_attached ? 1 : 0);
  attached.AppendTo(out);
  Gauge("kpath_collector_success", "").Add({{"collector", "meminfo"}}, 1).AppendTo(out);
  Gauge("kpath_foreign_hooks", "").Add({{"kind", "kprobe"}, {"hot", "false"}}, 0).AppendTo(out);
  Gauge("kpath_foreign_hook_set_info", "")
      .Add({{"fingerprint", "cbf29ce484222325"}, {"hooks", "0"}}, 1)
      .AppendTo(out);
}

// A host after `seconds` of seed 000: systemd starts ailink-check.service every 5 s, each start
// allocating 16512 B x 40 CPUs in mem_cgroup_css_alloc; Percpu +300 KB per 5 s.
MetricFamilies Seed000(double seconds) {
  MetricFamilies out;
  AddProbes(out);
  double starts = seconds / 5;
  Gauge("kpath_percpu_bytes", "").Add(22133882880 + 60000 * seconds).AppendTo(out);
  Counter("kpath_cgroup_mkdir_total", "")
      .Add({{"comm", "systemd"}, {"unit", "ailink-check.service"}}, starts)
      .Add({{"comm", "systemd"}, {"unit", "user@1000.service"}}, 1)
      .AppendTo(out);
  Counter("kpath_cgroup_rmdir_total", "")
      .Add({{"comm", "systemd"}, {"unit", "ailink-check.service"}}, starts)
      .AppendTo(out);
  Counter("kpath_percpu_alloc_bytes_total", "")
      .Add({{"comm", "systemd"}, {"caller", "mem_cgroup_css_alloc"}}, starts * 16512 * 40)
      .Add({{"comm", "bash"}, {"caller", "mm_init"}}, seconds * 50)
      .AppendTo(out);
  Counter("kpath_percpu_allocs_total", "")
      .Add({{"comm", "systemd"}, {"caller", "mem_cgroup_css_alloc"}}, starts)
      .AppendTo(out);
  Gauge("kpath_cgroups", "")
      .Add({{"controller", "memory"}, {"state", "live"}}, 71)
      .Add({{"controller", "memory"}, {"state", "dying"}}, 2000 + starts)
      .AppendTo(out);
  return out;
}

MetricFamilies Healthy(double seconds) {
  MetricFamilies out;
  AddProbes(out);
  Gauge("kpath_percpu_bytes", "").Add(125829120).AppendTo(out);
  Counter("kpath_cgroup_mkdir_total", "")
      .Add({{"comm", "systemd"}, {"unit", "logrotate.service"}}, seconds > 10 ? 1 : 0)
      .AppendTo(out);
  Gauge("kpath_cgroups", "")
      .Add({{"controller", "memory"}, {"state", "live"}}, 300)
      .Add({{"controller", "memory"}, {"state", "dying"}}, 12)
      .AppendTo(out);
  Counter("kpath_irqoff_regions_total", "").AppendTo(out);
  Counter("kpath_madvise_calls_total", "")
      .Add({{"comm", "java"}, {"advice", "dontneed"}}, 200 * seconds)
      .AppendTo(out);
  Counter("kpath_cpu_seconds_total", "")
      .Add({{"mode", "user"}}, 20 * seconds)
      .Add({{"mode", "system"}}, 4 * seconds)
      .Add({{"mode", "idle"}}, 16 * seconds)
      .AppendTo(out);
  Counter("kpath_tlb_shootdowns_total", "").Add(40 * 50 * seconds).AppendTo(out);
  return out;
}

const Finding& Get(const Diagnosis& d, const std::string& id) {
  for (const Finding& f : d.findings)
    if (f.id == id) return f;
  FAIL("no finding " << id);
  return d.findings.front();
}

}  // namespace

TEST_CASE("diagnose names the churning unit, its process and mem_cgroup_css_alloc (seed 000)") {
  Observation o{Seed000(0), Seed000(30), 30, 0, 40, false};
  Diagnosis d = Diagnose(o);
  REQUIRE(d.AnythingFound());
  const Finding& f = Get(d, "percpu_cgroup_churn");
  CHECK(f.state == Finding::State::kFound);
  CHECK_THAT(f.summary, Catch::Contains("ailink-check.service") && Catch::Contains("systemd") &&
                            Catch::Contains("mem_cgroup_css_alloc"));
  std::string text = RenderText(d);
  CHECK_THAT(text, Catch::Contains("FOUND  Percpu memory growth and cgroup churn"));
  CHECK_THAT(text, Catch::Contains("Percpu (/proc/meminfo): 20.6 GiB at the start"));
  CHECK_THAT(text, Catch::Contains("+58.6 KiB/s"));
  CHECK_THAT(text, Catch::Contains("per-CPU memory allocated by process systemd in kernel "
                                   "function mem_cgroup_css_alloc: 3.8 MiB in 6 allocations"));
  CHECK_THAT(text, Catch::Contains("CPUAccounting=no"));
  CHECK_THAT(text, Catch::Contains("long-running service"));
  // The unit that started once is evidence, not churn.
  CHECK_THAT(text, Catch::Contains("cgroups created for unit ailink-check.service by process "
                                   "systemd: 6 (0.20/s), 6 removed  <- churn"));
  CHECK_THAT(text, !Catch::Contains("user@1000.service by process systemd: 1 (0.03/s), 0 "
                                    "removed  <- churn"));
  std::string json = RenderJson(d);
  CHECK_THAT(json, Catch::StartsWith("{\"found\":true,"));
  CHECK_THAT(json, Catch::Contains(R"("labels":{"comm":"systemd","unit":"ailink-check.service"})"));
  CHECK_THAT(json, Catch::Contains(R"("caller":"mem_cgroup_css_alloc")"));
}

TEST_CASE("diagnose finds nothing on a healthy host and says what it looked at") {
  Observation o{Healthy(0), Healthy(30), 30, 0.002, 40, false};
  Diagnosis d = Diagnose(o);
  CHECK_FALSE(d.AnythingFound());
  for (const Finding& f : d.findings) CHECK(f.state != Finding::State::kFound);
  std::string text = RenderText(d);
  CHECK_THAT(text, Catch::Contains("Nothing found in 30.0 s."));
  CHECK_THAT(text,
             Catch::Contains("ok     IRQ-disabled regions (seeds 001, 004): no region of 10 ms "
                             "or more"));
  CHECK_THAT(text, Catch::Contains("process java returned memory with MADV_DONTNEED/MADV_FREE "
                                   "200/s"));
  // The hook set's fingerprint, to compare with another node's (issue 22).
  CHECK_THAT(text, Catch::Contains("hook set cbf29ce484222325 (0 distinct kind, target and "
                                   "owner): a node with the same hooks shows the same"));
  CHECK_THAT(RenderJson(d), Catch::StartsWith("{\"found\":false,"));
}

TEST_CASE("diagnose reports a madvise storm with its process (seed 003)") {
  auto host = [](double seconds) {
    MetricFamilies out = Healthy(seconds);
    Counter("kpath_madvise_calls_total", "")
        .Add({{"comm", "gateway"}, {"advice", "dontneed"}}, 3000 * seconds)
        .AppendTo(out);
    return out;
  };
  Diagnosis d = Diagnose(Observation{host(0), host(10), 10, 0, 40, false});
  const Finding& f = Get(d, "madvise_tlb");
  CHECK(f.state == Finding::State::kFound);
  CHECK_THAT(f.summary, Catch::StartsWith("gateway returns memory"));
  CHECK_THAT(RenderText(d), Catch::Contains("GOMEMLIMIT"));
}

TEST_CASE("diagnose says which pathology it could not check") {
  MetricFamilies a, b;
  AddProbes(a, /*irqoff_attached=*/false);
  AddProbes(b, /*irqoff_attached=*/false);
  Diagnosis d = Diagnose(Observation{a, b, 5, 0, 2, false});
  CHECK(Get(d, "irqoff").state == Finding::State::kNotChecked);
  CHECK_THAT(RenderText(d), Catch::Contains("Not attached: irqoff"));
  CHECK_THAT(RenderText(d), Catch::Contains("n/a    IRQ-disabled regions"));
}

TEST_CASE("diagnose tells a probe off by configuration from one that failed to attach") {
  MetricFamilies a, b;
  for (MetricFamilies* m : {&a, &b}) {
    AddProbes(*m, /*irqoff_attached=*/true, /*madvise_attached=*/false);
    Gauge("kpath_probe_excluded_by_config", "")
        .Add({{"probe", "madvise"}}, 1)
        .Add({{"probe", "slabinfo_readers"}}, 0)
        .AppendTo(*m);
    Counter("kpath_tlb_shootdowns_total", "").Add(100).AppendTo(*m);
  }
  Diagnosis d = Diagnose(Observation{a, b, 5, 0, 2, false});
  const std::string text = RenderText(d);
  CHECK_THAT(text, Catch::Contains("probe madvise is off by configuration"));
  CHECK_THAT(text, Catch::Contains("probes.madvise.mechanisms"));
  CHECK_THAT(text, !Catch::Contains("probe madvise is not attached"));
}

TEST_CASE(
    "diagnose lists the 5 longest IRQ-off regions of the events and the hooks that "
    "appeared, as evidence that does not change the verdict") {
  Observation o{Healthy(0), Healthy(30), 30, 0.002, 40, false};
  o.events_source = "the running kpathd's events";
  for (int ms : {12, 40, 11, 25, 189, 13, 15}) {
    o.events.push_back(
        "{\"seq\":1,\"time\":\"2026-12-03T07:" + std::to_string(10 + ms % 40) +
        ":00.000000Z\",\"kind\":\"irqoff_region\",\"message\":\"IRQs off " + std::to_string(ms) +
        ".0 ms on CPU 3 in ss (pid 42), culprit get_slabinfo; stack: a <- b\",\"seconds\":" +
        std::to_string(ms / 1000.0) + ",\"cpu\":3}");
  }
  o.events.push_back(
      "{\"seq\":2,\"time\":\"2026-12-03T07:00:01.000000Z\",\"kind\":\"hook_appeared\",\"message\":"
      "\"foreign kprobe on tcp_sendmsg (owner agent, unit agent.service) "
      "appeared\",\"at_start\":0}");
  o.events.push_back(
      "{\"seq\":3,\"time\":\"2026-12-03T07:00:00.000000Z\",\"kind\":\"hook_appeared\",\"message\":"
      "\"foreign ftrace on vfs_read (owner unknown, unit none) present when kpathd started\","
      "\"at_start\":1}");
  Diagnosis d = Diagnose(o);
  CHECK_FALSE(d.AnythingFound());  // the watch saw nothing: the verdict is the watch's
  const std::string text = RenderText(d);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("- the 5 longest of 7 regions in the running kpathd's events:\n"
                                   "         -   2026-12-03T07:39:00.000000Z: IRQs off 189.0 ms on "
                                   "CPU 3 in ss (pid 42), culprit get_slabinfo; stack: a <- b\n"
                                   "         -   2026-12-03T07:10:00.000000Z: IRQs off 40.0 ms"));
  CHECK_THAT(text, !Catch::Contains("IRQs off 11.0 ms"));  // the 6th and 7th longest
  CHECK_THAT(text, Catch::Contains("1 hook appeared and 0 left in the running kpathd's events (1 "
                                   "there at its start)\n         -   2026-12-03T07:00:01.000000Z: "
                                   "foreign kprobe on tcp_sendmsg (owner agent, unit "
                                   "agent.service) appeared"));
}
