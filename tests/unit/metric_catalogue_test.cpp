// The metric catalogue, the metrics contract (docs/metrics.md) and the golden /metrics
// (tests/golden/) name the same families: the golden file's HELP and TYPE lines are the
// catalogue's to the letter, and every catalogued family is in docs/metrics.md and the other way
// round. The families the golden run cannot show are listed here, each with the reason.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/events/events_metrics.h"
#include "probes/cgroups/cgroups_metrics.h"
#include "probes/collect/health_metrics.h"
#include "probes/hooks/hooks_metrics.h"
#include "probes/irqoff/irqoff_metrics.h"
#include "probes/madvise/madvise_metrics.h"
#include "probes/percpu/percpu_metrics.h"
#include "probes/procfs/procfs_metrics.h"
#include "probes/slab/slab_metrics.h"
#include "prometheus/text_serializer.h"

using namespace kpath;

namespace {

std::map<std::string, MetricSpec> Catalogue() {
  std::map<std::string, MetricSpec> out;
  auto add = [&](const auto& specs) {
    for (const MetricSpec& spec : specs) {
      INFO(spec.name);
      CHECK(out.emplace(std::string(spec.name), spec).second);  // declared once
    }
  };
  add(health_metrics::kAll);
  add(procfs_metrics::kAll);
  add(percpu_metrics::kAll);
  add(cgroups_metrics::kAll);
  add(irqoff_metrics::kAll);
  add(slab_metrics::kAll);
  add(hooks_metrics::kAll);
  add(madvise_metrics::kAll);
  add(events_metrics::kAll);
  return out;
}

std::string ReadFile(const std::string& relative) {
  std::ifstream in(std::string(KPATH_SOURCE_DIR) + "/" + relative);
  INFO(relative);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The HELP and TYPE lines /metrics carries for `spec`, as prometheus-cpp writes them.
std::string Head(const MetricSpec& spec) {
  MetricFamilies families;
  FamilyBuilder(spec).AppendTo(families);
  return prometheus::TextSerializer().Serialize(families);
}

// "a, b" for a failure message.
std::string Join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

std::set<std::string> Minus(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const std::string& n : a)
    if (!b.count(n)) out.insert(n);
  return out;
}

std::set<std::string> Names(const std::map<std::string, MetricSpec>& catalogue) {
  std::set<std::string> out;
  for (const auto& [name, spec] : catalogue) out.insert(name);
  return out;
}

// The families the golden run (BPF off, one collection, fixture /proc and /sys) cannot show, and
// why.
const std::map<std::string, std::string> kNotInGolden = {
    // Dropped by golden_test.cpp's Stable(): they differ between runs and hosts.
    {"kpath_build_info", "filtered"},
    {"kpath_collector_duration_seconds", "filtered"},
    {"kpath_slab_read_duration_seconds", "filtered"},
    {"kpath_bpf_stats_enabled", "filtered"},
    {"process_cpu_seconds_total", "filtered"},
    {"process_resident_memory_bytes", "filtered"},
    {"process_virtual_memory_bytes", "filtered"},
    {"process_threads", "filtered"},
    {"process_start_time_seconds", "filtered"},
    {"process_open_fds", "filtered"},
    {"process_max_fds", "filtered"},
    // A slope needs a second collection.
    {"kpath_percpu_growth_bytes_per_second", "second sample"},
    // No debugfs kprobes/enabled in the fixture tree.
    {"kpath_kprobes_enabled", "fixture"},
    // BPF is off: no probe attaches, so none reports.
    {"kpath_probe_attached", "bpf off"},
    {"kpath_probe_excluded_by_config", "bpf off"},
    {"kpath_probe_supported", "bpf off"},
    {"kpath_probe_selftest_success", "bpf off"},
    {"kpath_bpf_program_run_seconds_total", "bpf off"},
    {"kpath_bpf_program_runs_total", "bpf off"},
    {"kpath_events_lost_total", "bpf off"},
    {"kpath_percpu_allocs_total", "bpf off"},
    {"kpath_percpu_alloc_bytes_total", "bpf off"},
    {"kpath_percpu_allocs_evicted_total", "bpf off"},
    {"kpath_percpu_alloc_bytes_evicted_total", "bpf off"},
    {"kpath_percpu_outstanding_bytes", "bpf off"},
    {"kpath_percpu_untracked_frees_total", "bpf off"},
    {"kpath_cgroup_mkdir_total", "bpf off"},
    {"kpath_cgroup_rmdir_total", "bpf off"},
    {"kpath_cgroup_mkdir_evicted_total", "bpf off"},
    {"kpath_cgroup_rmdir_evicted_total", "bpf off"},
    {"kpath_cgroup_churn_per_second", "bpf off"},
    {"kpath_cgroup_churn_unlabelled_total", "bpf off"},
    {"kpath_irqoff_seconds", "bpf off"},
    {"kpath_irqoff_max_seconds", "bpf off"},
    {"kpath_irqoff_regions_total", "bpf off"},
    {"kpath_irqoff_regions_evicted_total", "bpf off"},
    {"kpath_irqoff_cpu_regions_total", "bpf off"},
    {"kpath_irqoff_cpu_region_seconds_total", "bpf off"},
    {"kpath_irqoff_ignored_late_ticks_total", "bpf off"},
    {"kpath_irqoff_timer_ticks_total", "bpf off"},
    {"kpath_irqoff_nmi_samples_total", "bpf off"},
    {"kpath_irqoff_threshold_seconds", "bpf off"},
    {"kpath_irqoff_resolution_seconds", "bpf off"},
    {"kpath_irqoff_detector_info", "bpf off"},
    {"kpath_slabinfo_reads_total", "bpf off"},
    {"kpath_slabinfo_reads_evicted_total", "bpf off"},
    {"kpath_madvise_calls_total", "bpf off"},
    {"kpath_madvise_bytes_total", "bpf off"},
    {"kpath_madvise_calls_evicted_total", "bpf off"},
    {"kpath_madvise_bytes_evicted_total", "bpf off"},
    {"kpath_tlb_flushes_total", "bpf off"},
};

}  // namespace

TEST_CASE("metric catalogue: one well-formed entry per family") {
  const auto catalogue = Catalogue();
  REQUIRE(catalogue.size() >= 50);
  const std::regex name_re("(kpath|process)_[a-z0-9_]+");
  for (const auto& [name, spec] : catalogue) {
    INFO(name);
    CHECK(std::regex_match(name, name_re));
    CHECK(!spec.help.empty());
    // Counters end in _total, nothing else does (docs/metrics.md).
    CHECK((spec.type == MetricType::kCounter) == name.ends_with("_total"));
  }
}

TEST_CASE("metric catalogue: every *_metrics.h of the tree is in the catalogue") {
  // A header this test does not include would leave its families out of every check below.
  const std::set<std::string> catalogued = Names(Catalogue());
  std::set<std::string> declared;
  const std::regex spec(R"re(inline constexpr MetricSpec \w+\{\s*"([a-z0-9_]+)")re");
  // The probes' headers, and the daemon's own (daemon/events/events_metrics.h).
  for (const char* dir : {"/probes", "/daemon"}) {
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(std::string(KPATH_SOURCE_DIR) + dir)) {
      const std::string path = entry.path().string();
      if (!path.ends_with("_metrics.h")) continue;
      const std::string text = ReadFile(path.substr(std::string(KPATH_SOURCE_DIR).size() + 1));
      for (std::sregex_iterator it(text.begin(), text.end(), spec), end; it != end; ++it) {
        declared.insert((*it)[1]);
      }
    }
  }
  INFO("declared in a *_metrics.h, not in this test's catalogue: "
       << Join(Minus(declared, catalogued)));
  CHECK(declared == catalogued);
}

TEST_CASE("metric catalogue: docs/metrics.md documents exactly the catalogued families") {
  const std::set<std::string> catalogued = Names(Catalogue());
  // The first cell of each table row: `name` or `name` / `name`.
  std::set<std::string> documented;
  std::istringstream doc(ReadFile("docs/metrics.md"));
  const std::regex code("`([a-z0-9_]+)`");
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::string cell = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator it(cell.begin(), cell.end(), code), end; it != end; ++it) {
      INFO(line);
      CHECK(documented.insert((*it)[1]).second);  // documented once
    }
  }
  REQUIRE(documented.size() >= 50);
  INFO("in the catalogue, not in docs/metrics.md: " << Join(Minus(catalogued, documented)));
  INFO("in docs/metrics.md, not in the catalogue: " << Join(Minus(documented, catalogued)));
  CHECK(documented == catalogued);
}

TEST_CASE("metric catalogue: the golden /metrics carries the catalogue's HELP and TYPE") {
  const auto catalogue = Catalogue();
  // Each family's HELP and TYPE lines in the golden file, by name.
  std::map<std::string, std::string> heads;
  std::istringstream golden(ReadFile("tests/golden/linux-6.18.44-x86_64.metrics"));
  const std::regex head("# (HELP|TYPE) ([a-zA-Z0-9_:]+) .*");
  for (std::string line; std::getline(golden, line);) {
    std::smatch m;
    INFO(line);
    if (std::regex_match(line, m, head)) {
      heads[m[2]] += line + "\n";
    } else {
      CHECK(line.rfind("#", 0) != 0);
    }
  }
  REQUIRE(heads.size() >= 15);
  std::set<std::string> shown;
  for (const auto& [name, lines] : heads) {
    INFO(name);
    auto it = catalogue.find(name);
    REQUIRE(it != catalogue.end());
    CHECK(lines == Head(it->second));
    shown.insert(name);
  }
  std::set<std::string> exempt;
  for (const auto& [name, why] : kNotInGolden) exempt.insert(name);
  const std::set<std::string> missing = Minus(Names(catalogue), shown);
  INFO("catalogued, not in the golden file and not listed as unshowable: "
       << Join(Minus(missing, exempt)));
  INFO("listed as unshowable but in the golden file or not catalogued: "
       << Join(Minus(exempt, missing)));
  CHECK(missing == exempt);
}
