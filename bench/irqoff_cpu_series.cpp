// kpath-bench-irqoff-cpus: what a per-CPU IRQ-off view costs /metrics at 2, 64 and 256 CPUs,
// built with kpathd's own metric code (FamilyBuilder, FoldedCounters, AddRegionHistogram,
// AppendPerCpuFamilies) and serialized as /metrics serializes it (prometheus-cpp's
// TextSerializer). Three layouts:
//   none        the families before the per-CPU view: the histogram and
//               kpath_irqoff_regions_total{comm,culprit} (+ its evicted family);
//   cpu_label   both with a `cpu` label: a histogram per CPU, regions_total{comm,culprit,cpu};
//   per_cpu     `none` plus kpath_irqoff_cpu_regions_total{cpu} and
//               kpath_irqoff_cpu_region_seconds_total{cpu} (what kpathd ships).
// Every CPU has counted regions, from `--pairs` (comm, culprit) pairs each (a busy host after
// days: every process that stalls, stalls everywhere). Prints one line per CPU count and layout:
//     cpus layout series bytes gzip_bytes build_us serialize_us
// (series: sample lines; bytes: the text; gzip_bytes: zlib level 6, as a scraper asking for gzip
// gets it; the times are medians of --rounds).
//
//   kpath-bench-irqoff-cpus [--rounds N] [--pairs P] [--cpus 2,64,256]
#include <linux/types.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "probes/collect/folded_counters.h"
#include "probes/collect/metric_families.h"
#include "probes/irqoff/irqoff.h"
#include "probes/irqoff/irqoff_metrics.h"
#include "probes/irqoff/irqoff_totals_families.h"
#include "prometheus/text_serializer.h"

using namespace kpath;

namespace {

enum class Layout { kNone, kCpuLabel, kPerCpu };
constexpr const char* kLayoutNames[] = {"none", "cpu_label", "per_cpu"};

// Per-CPU totals as the kernel would hold them: regions in a few buckets on every CPU.
std::vector<irqoff_totals> Totals(int cpus) {
  std::vector<irqoff_totals> per_cpu(static_cast<size_t>(cpus));
  for (int c = 0; c < cpus; ++c) {
    irqoff_totals& t = per_cpu[static_cast<size_t>(c)];
    t.buckets[4] = 3 + static_cast<uint64_t>(c);  // 5-10 ms: under the default threshold's bucket
    t.buckets[5] = 2;
    t.buckets[7] = 1;
    for (uint64_t b : t.buckets) t.regions += b;
    t.region_ns = t.regions * 17'000'000;
  }
  return per_cpu;
}

// The regions' labelled counters after one interval in which every pair stalled every CPU.
FoldedCounters Regions(Layout layout, int cpus, int pairs) {
  bool by_cpu = layout == Layout::kCpuLabel;
  std::vector<std::string> labels{"comm", "culprit"};
  std::vector<size_t> top_n{20, 20};
  if (by_cpu) {
    labels.push_back("cpu");
    top_n.push_back(static_cast<size_t>(cpus));
  }
  FoldedCounters regions(labels, top_n, 1);
  const uint64_t one = 1;
  for (int p = 0; p < pairs; ++p) {
    std::string comm = "proc" + std::to_string(p);
    std::string culprit = "func" + std::to_string(p);
    for (int c = 0; c < (by_cpu ? cpus : 1); ++c) {
      std::vector<std::string> key{comm, culprit};
      if (by_cpu) key.push_back(std::to_string(c));
      regions.Add(key, std::span<const uint64_t>(&one, 1));
    }
  }
  regions.EndInterval();
  return regions;
}

MetricFamilies Build(Layout layout, const std::vector<irqoff_totals>& per_cpu,
                     const FoldedCounters& regions, const std::vector<int>& online) {
  MetricFamilies out;
  FamilyBuilder histogram(irqoff_metrics::kSeconds);
  if (layout == Layout::kCpuLabel) {
    for (size_t c = 0; c < per_cpu.size(); ++c) {
      AddRegionHistogram({{"cpu", std::to_string(c)}}, per_cpu[c], histogram);
    }
  } else {
    irqoff_totals sum{};
    for (const irqoff_totals& t : per_cpu) {
      sum.region_ns += t.region_ns;
      for (size_t b = 0; b <= IRQOFF_BUCKETS; ++b) sum.buckets[b] += t.buckets[b];
    }
    AddRegionHistogram({}, sum, histogram);
  }
  histogram.AppendTo(out);
  regions.AppendFamilies(irqoff_metrics::kRegionsTotal, irqoff_metrics::kRegionsEvictedTotal, 0,
                         out);
  if (layout == Layout::kPerCpu) AppendPerCpuFamilies(per_cpu, online, out);
  return out;
}

size_t SampleLines(const std::string& text) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') ++n;
  }
  return n;
}

size_t GzipBytes(const std::string& text) {
  uLongf size = compressBound(static_cast<uLong>(text.size()));
  std::vector<Bytef> buffer(size);
  if (compress2(buffer.data(), &size, reinterpret_cast<const Bytef*>(text.data()),
                static_cast<uLong>(text.size()), 6) != Z_OK) {
    return 0;
  }
  return size + 12;  // gzip's header and trailer instead of zlib's
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  int pairs = 10;
  std::vector<int> cpu_counts{2, 64, 256};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--rounds") {
      rounds = std::atoi(argv[i + 1]);
    } else if (flag == "--pairs") {
      pairs = std::atoi(argv[i + 1]);
    } else if (flag == "--cpus") {
      cpu_counts.clear();
      std::istringstream in(argv[i + 1]);
      for (std::string n; std::getline(in, n, ',');) cpu_counts.push_back(std::atoi(n.c_str()));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (argc % 2 == 0 || rounds < 1 || pairs < 1 || cpu_counts.empty()) {
    std::fprintf(stderr, "usage: %s [--rounds N] [--pairs P] [--cpus 2,64,256]\n", argv[0]);
    return 2;
  }
  std::printf("%5s %-10s %7s %9s %10s %9s %12s\n", "cpus", "layout", "series", "bytes",
              "gzip_bytes", "build_us", "serialize_us");
  for (int cpus : cpu_counts) {
    std::vector<irqoff_totals> per_cpu = Totals(cpus);
    std::vector<int> online(static_cast<size_t>(cpus));
    for (int c = 0; c < cpus; ++c) online[static_cast<size_t>(c)] = c;
    for (Layout layout : {Layout::kNone, Layout::kCpuLabel, Layout::kPerCpu}) {
      FoldedCounters regions = Regions(layout, cpus, pairs);
      std::vector<double> build_us, serialize_us;
      std::string text;
      for (int r = 0; r < rounds; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        MetricFamilies families = Build(layout, per_cpu, regions, online);
        auto t1 = std::chrono::steady_clock::now();
        text = prometheus::TextSerializer().Serialize(families);
        auto t2 = std::chrono::steady_clock::now();
        build_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        serialize_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
      std::printf("%5d %-10s %7zu %9zu %10zu %9.1f %12.1f\n", cpus,
                  kLayoutNames[static_cast<int>(layout)], SampleLines(text), text.size(),
                  GzipBytes(text), Median(build_us), Median(serialize_us));
    }
  }
  return 0;
}
