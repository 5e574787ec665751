#include "probes/procfs/meminfo.h"
#include "fixture_text.h"

#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "probes/kernel/host_paths.h"
#include "probes/procfs/meminfo_collector.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = KPATH_FIXTURES;
const fs::path kLinux618 = kFixtures / "linux-6.18.44-x86_64";
const fs::path kNodeExporter = kFixtures / "node_exporter-fixture";

HostPaths RootedAt(const fs::path& root) { return HostPaths(root / "proc", root / "sys"); }

// A fixture tree's /proc/meminfo.
std::string ReadMeminfo(const fs::path& root) { return ReadFixture(root / "proc" / "meminfo"); }

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// ---------------------------------------------------------------------------------------------
// ParseMeminfo

TEST_CASE("ParseMeminfo reads the real 6.18 file: kB fields x1024, in file order", "[meminfo]") {
  const std::string text = ReadMeminfo(kLinux618);
  absl::StatusOr<Meminfo> m = ParseMeminfo(text);
  REQUIRE(m.ok());
  // One field per line of the file.
  CHECK(m->fields().size() == static_cast<size_t>(std::count(text.begin(), text.end(), '\n')));
  CHECK(m->fields().front().name == "MemTotal");
  CHECK(m->fields().back().name == "DirectMap1G");
  CHECK(m->Bytes("MemTotal") == 24683652ull * 1024);
  CHECK(m->Bytes("Percpu") == 712ull * 1024);
  CHECK(m->Bytes("Active(anon)") == 1528ull * 1024);
  CHECK(m->Bytes("VmallocTotal") == 34359738367ull * 1024);
  CHECK(m->Bytes("Hugepagesize") == 2048ull * 1024);
  for (const char* name :
       {"MemTotal", "Percpu", "Slab", "SReclaimable", "SUnreclaim", "VmallocUsed"}) {
    CHECK(m->Bytes(name).has_value());
  }
}

TEST_CASE("ParseMeminfo keeps unit-less HugePages fields as plain counts", "[meminfo]") {
  absl::StatusOr<Meminfo> real = ParseMeminfo(ReadMeminfo(kLinux618));
  REQUIRE(real.ok());
  for (const char* name :
       {"HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp"}) {
    const MeminfoField* f = real->Find(name);
    REQUIRE(f != nullptr);
    CHECK(f->unit == MeminfoUnit::kCount);
    CHECK_FALSE(real->Bytes(name).has_value());
  }

  absl::StatusOr<Meminfo> m =
      ParseMeminfo("HugePages_Total:      16\nHugepagesize:       2048 kB\n");
  REQUIRE(m.ok());
  CHECK(m->Count("HugePages_Total") == 16u);
  CHECK_FALSE(m->Bytes("HugePages_Total").has_value());
  CHECK(m->Bytes("Hugepagesize") == 2097152u);
  CHECK_FALSE(m->Count("Hugepagesize").has_value());
  CHECK(m->Find("MemTotal") == nullptr);
}

TEST_CASE("ParseMeminfo reads node_exporter's fixture, a kernel without Percpu", "[meminfo]") {
  absl::StatusOr<Meminfo> m = ParseMeminfo(ReadMeminfo(kNodeExporter));
  REQUIRE(m.ok());
  CHECK(m->fields().size() == 42);
  CHECK(m->Bytes("MemTotal") == 3742148ull * 1024);
  CHECK(m->Bytes("VmallocChunk") == 34359338876ull * 1024);
  CHECK(m->Find("Percpu") == nullptr);
  CHECK(m->Find("MemAvailable") == nullptr);
}

TEST_CASE("ParseMeminfo names the line of each garbled fixture", "[meminfo]") {
  struct Case {
    const char* root;
    const char* expected;
  };
  const Case cases[] = {
      {"garbled/meminfo-not-a-number",
       "line 39 \"Percpu:              abc kB\": value is not a number"},
      {"garbled/meminfo-truncated", "line 39 \"Percpu:      \": no value"},
      {"garbled/meminfo-empty", "no fields"},
  };
  for (const Case& c : cases) {
    INFO(c.root);
    absl::StatusOr<Meminfo> m = ParseMeminfo(ReadMeminfo(kFixtures / c.root));
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()), Catch::Contains(c.expected));
  }
}

TEST_CASE("ParseMeminfo rejects malformed lines with the line number and the reason", "[meminfo]") {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"MemTotal: 1 kB\nPercpu: -5 kB\n", "line 2 \"Percpu: -5 kB\": negative value"},
      {"Percpu: 18446744073709551616 kB\n",
       "line 1 \"Percpu: 18446744073709551616 kB\": value "
       "does not fit in 64 bits"},
      {"Percpu: 18014398509481984 kB\n", "value in bytes does not fit in 64 bits"},
      {"Percpu: 12x kB\n", "value is not a number"},
      {"Percpu: 0x10 kB\n", "value is not a number"},
      {"Percpu: +5 kB\n", "value is not a number"},
      {"Percpu: 12 MB\n", "unknown unit"},
      {"Percpu: 12 kB extra\n", "unexpected text after the value"},
      {"Percpu 12 kB\n", "line 1 \"Percpu 12 kB\": no ':' after the field name"},
      {": 12 kB\n", "bad field name"},
      {"Per cpu: 12 kB\n", "bad field name"},
      {"MemTotal: 1 kB\nMemTotal: 2 kB\n", "line 2 \"MemTotal: 2 kB\": field name repeated"},
      {"\n\n  \t\n", "no fields"},
      {"", "no fields"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    absl::StatusOr<Meminfo> m = ParseMeminfo(c.text);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()), Catch::Contains(c.expected));
  }
}

TEST_CASE("ParseMeminfo accepts the largest values that fit", "[meminfo]") {
  absl::StatusOr<Meminfo> m =
      ParseMeminfo("Big: 18446744073709551615\nBigKb: 18014398509481983 kB");  // no final newline
  REQUIRE(m.ok());
  CHECK(m->Count("Big") == 18446744073709551615ull);
  CHECK(m->Bytes("BigKb") == 18014398509481983ull * 1024);
}

TEST_CASE("ParseMeminfo skips blank lines but counts them in line numbers", "[meminfo]") {
  CHECK(ParseMeminfo("\nMemTotal:\t1 kB\n\nPercpu: 2 kB  \n").ok());
  absl::StatusOr<Meminfo> m = ParseMeminfo("\nMemTotal: 1 kB\n\nPercpu: x kB\n");
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(std::string(m.status().message()), Catch::StartsWith("line 4 "));
}

TEST_CASE("ParseMeminfo quotes a huge binary line escaped and shortened", "[meminfo]") {
  std::string line = "Percpu: ";
  line.append(100000, '\x01');
  absl::StatusOr<Meminfo> m = ParseMeminfo(line);
  REQUIRE_FALSE(m.ok());
  const std::string message(m.status().message());
  CHECK(message.size() < 600);
  CHECK(Contains(message, "\\x01"));
  CHECK(Contains(message, "..."));
  CHECK(message.find('\x01') == std::string::npos);
}

TEST_CASE("ParseMeminfo returns OK or InvalidArgument on mutated input, never crashes",
          "[meminfo]") {
  const std::string real = ReadMeminfo(kLinux618);
  using namespace std::string_literals;
  const std::string alphabet = "0123456789 :kB\n\t-xP()\x00\xff"s;  // with the NUL
  std::mt19937 rng(42);
  for (int round = 0; round < 2000; ++round) {
    std::string text = real;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + rng() % 40);
          break;
        default:
          text.resize(at);
          break;
      }
    }
    absl::StatusOr<Meminfo> m = ParseMeminfo(text);
    if (!m.ok()) REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

// ---------------------------------------------------------------------------------------------
// MeminfoCollector

const prometheus::MetricFamily* FindFamily(const MetricFamilies& families, std::string_view name) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::optional<double> FieldValue(const prometheus::MetricFamily& family, std::string_view field) {
  for (const prometheus::ClientMetric& m : family.metric) {
    if (m.label.size() == 1 && m.label[0].name == "field" && m.label[0].value == field) {
      return m.gauge.value;
    }
  }
  return std::nullopt;
}

double OnlyValue(const prometheus::MetricFamily* family) {
  REQUIRE(family != nullptr);
  REQUIRE(family->metric.size() == 1);
  CHECK(family->metric[0].label.empty());
  return family->metric[0].gauge.value;
}

// A procfs root in a fresh temporary directory whose meminfo the test rewrites between collects.
class TempRoot {
 public:
  TempRoot() {
    std::string pattern = (fs::temp_directory_path() / "kpath-meminfo-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    root_ = pattern;
    fs::create_directories(root_ / "proc");
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  const fs::path& root() const { return root_; }
  void WriteMeminfo(std::string_view text) const {
    std::ofstream out(root_ / "proc" / "meminfo", std::ios::trunc);
    out << text;
    REQUIRE(out.good());
  }
  void WritePercpuKb(uint64_t kb) const {
    WriteMeminfo("MemTotal:       24683652 kB\nPercpu:  " + std::to_string(kb) +
                 " kB\nHugePages_Total:       4\n");
  }

 private:
  fs::path root_;
};

// A clock the test moves by hand.
struct ManualClock {
  absl::Time now = absl::FromUnixSeconds(1767225600);
  MeminfoCollector::Clock Get() {
    return [this] { return now; };
  }
};

TEST_CASE("MeminfoCollector exports every kB field, Percpu, and no rate after one sample",
          "[meminfo_collector]") {
  ManualClock clock;
  MeminfoCollector collector(RootedAt(kLinux618), absl::Minutes(1), clock.Get());
  CHECK(collector.Name() == "meminfo");
  MetricFamilies out;
  REQUIRE(collector.Collect(out).ok());

  const prometheus::MetricFamily* fields = FindFamily(out, "kpath_meminfo_bytes");
  REQUIRE(fields != nullptr);
  CHECK(fields->type == prometheus::MetricType::Gauge);
  CHECK(fields->help == "Fields of /proc/meminfo in bytes");
  CHECK(fields->metric.size() == 50);  // 54 lines minus the four unit-less HugePages_* counts
  CHECK(FieldValue(*fields, "MemTotal") == 24683652.0 * 1024);
  CHECK(FieldValue(*fields, "Percpu") == 712.0 * 1024);
  CHECK(FieldValue(*fields, "Active(anon)") == 1528.0 * 1024);
  CHECK_FALSE(FieldValue(*fields, "HugePages_Total").has_value());

  const prometheus::MetricFamily* percpu = FindFamily(out, "kpath_percpu_bytes");
  REQUIRE(percpu != nullptr);
  CHECK(percpu->type == prometheus::MetricType::Gauge);
  CHECK(OnlyValue(percpu) == 712.0 * 1024);
  CHECK(FindFamily(out, "kpath_percpu_growth_bytes_per_second") == nullptr);
  CHECK(collector.StatusFragment() == "Percpu 712 KiB");
}

TEST_CASE("MeminfoCollector reports Percpu growth as bytes per second from the second sample",
          "[meminfo_collector]") {
  TempRoot root;
  ManualClock clock;
  MeminfoCollector collector(RootedAt(root.root()), absl::Minutes(1), clock.Get());

  root.WritePercpuKb(1000);
  MetricFamilies first;
  REQUIRE(collector.Collect(first).ok());
  CHECK(FindFamily(first, "kpath_percpu_growth_bytes_per_second") == nullptr);

  root.WritePercpuKb(1340);
  clock.now += absl::Seconds(1);
  MetricFamilies second;
  REQUIRE(collector.Collect(second).ok());
  CHECK(OnlyValue(FindFamily(second, "kpath_percpu_bytes")) == 1340.0 * 1024);
  const prometheus::MetricFamily* growth =
      FindFamily(second, "kpath_percpu_growth_bytes_per_second");
  REQUIRE(growth != nullptr);
  CHECK(growth->type == prometheus::MetricType::Gauge);
  CHECK(OnlyValue(growth) == Approx(340.0 * 1024));
  CHECK(collector.StatusFragment() == "Percpu 1.3 MiB +340 KiB/s");
}

TEST_CASE("MeminfoCollector::StatusFragment shows GiB and a signed rate", "[meminfo_collector]") {
  TempRoot root;
  ManualClock clock;
  MeminfoCollector collector(RootedAt(root.root()), absl::Minutes(1), clock.Get());
  MetricFamilies out;

  root.WritePercpuKb(1887437);  // 1.8 GiB
  REQUIRE(collector.Collect(out).ok());
  CHECK(collector.StatusFragment() == "Percpu 1.8 GiB");
  root.WritePercpuKb(1887437 + 340);
  clock.now += absl::Seconds(1);
  REQUIRE(collector.Collect(out).ok());
  CHECK(collector.StatusFragment() == "Percpu 1.8 GiB +340 KiB/s");

  // Flat, then shrinking: the sign follows the slope.
  clock.now += absl::Seconds(1);
  REQUIRE(collector.Collect(out).ok());
  CHECK(collector.StatusFragment() == "Percpu 1.8 GiB +170 KiB/s");
  collector.SetGrowthWindow(absl::ZeroDuration());
  root.WritePercpuKb(1887437 + 340 - 2);
  clock.now += absl::Seconds(1);
  collector.SetGrowthWindow(absl::Seconds(1));
  REQUIRE(collector.Collect(out).ok());
  CHECK(collector.StatusFragment() == "Percpu 1.8 GiB -2 KiB/s");
}

TEST_CASE("MeminfoCollector::SetGrowthWindow drops samples outside the new window",
          "[meminfo_collector]") {
  TempRoot root;
  ManualClock clock;
  MeminfoCollector collector(RootedAt(root.root()), absl::Minutes(1), clock.Get());
  MetricFamilies out;
  root.WritePercpuKb(1000);
  REQUIRE(collector.Collect(out).ok());
  clock.now += absl::Seconds(30);
  root.WritePercpuKb(1030);
  REQUIRE(collector.Collect(out).ok());

  collector.SetGrowthWindow(absl::Seconds(10));
  clock.now += absl::Seconds(30);
  MetricFamilies after;
  REQUIRE(collector.Collect(after).ok());
  // Only the newest sample is within 10 s: no rate until the next one.
  CHECK(FindFamily(after, "kpath_percpu_growth_bytes_per_second") == nullptr);
  clock.now += absl::Seconds(5);
  root.WritePercpuKb(1035);
  MetricFamilies next;
  REQUIRE(collector.Collect(next).ok());
  CHECK(OnlyValue(FindFamily(next, "kpath_percpu_growth_bytes_per_second")) == Approx(1024.0));
}

TEST_CASE("MeminfoCollector omits Percpu on kernels without it and warns once",
          "[meminfo_collector]") {
  auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", ring));

  ManualClock clock;
  MeminfoCollector collector(RootedAt(kNodeExporter), absl::Minutes(1), clock.Get());
  for (int i = 0; i < 3; ++i) {
    MetricFamilies out;
    REQUIRE(collector.Collect(out).ok());
    const prometheus::MetricFamily* fields = FindFamily(out, "kpath_meminfo_bytes");
    REQUIRE(fields != nullptr);
    CHECK(FieldValue(*fields, "MemTotal") == 3742148.0 * 1024);
    CHECK(FindFamily(out, "kpath_percpu_bytes") == nullptr);
    CHECK(FindFamily(out, "kpath_percpu_growth_bytes_per_second") == nullptr);
    clock.now += absl::Seconds(1);
  }
  const std::vector<std::string> logged = ring->last_formatted();
  spdlog::set_default_logger(previous);

  REQUIRE(logged.size() == 1);
  CHECK(Contains(logged[0], "warning"));
  CHECK(Contains(logged[0], "no Percpu"));
  CHECK(collector.StatusFragment().empty());
}

TEST_CASE("MeminfoCollector fails without families when meminfo is missing",
          "[meminfo_collector]") {
  TempRoot root;  // proc/ exists, proc/meminfo does not
  MeminfoCollector collector(RootedAt(root.root()), absl::Minutes(1));
  MetricFamilies out;
  absl::Status status = collector.Collect(out);
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK(Contains(std::string(status.message()), "meminfo"));
  CHECK(out.empty());
  CHECK(collector.StatusFragment().empty());
}

TEST_CASE("MeminfoCollector fails without families on a garbled file, naming path and line",
          "[meminfo_collector]") {
  for (const char* variant :
       {"garbled/meminfo-not-a-number", "garbled/meminfo-truncated", "garbled/meminfo-empty"}) {
    INFO(variant);
    MeminfoCollector collector(RootedAt(kFixtures / variant), absl::Minutes(1));
    MetricFamilies out;
    absl::Status status = collector.Collect(out);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(std::string(status.message()),
                   (kFixtures / variant / "proc" / "meminfo").string()));
    CHECK(out.empty());
  }
}

TEST_CASE("MeminfoCollector's fragment goes empty after a failed collection",
          "[meminfo_collector]") {
  TempRoot root;
  MeminfoCollector collector(RootedAt(root.root()), absl::Minutes(1));
  MetricFamilies out;
  root.WritePercpuKb(2048);
  REQUIRE(collector.Collect(out).ok());
  CHECK(collector.StatusFragment() == "Percpu 2 MiB");
  root.WriteMeminfo("Percpu: abc kB\n");
  CHECK_FALSE(collector.Collect(out).ok());
  CHECK(collector.StatusFragment().empty());
}

// ---------------------------------------------------------------------------------------------
// FormatBytesIEC

TEST_CASE("FormatBytesIEC uses binary prefixes and at most one decimal", "[format]") {
  CHECK(FormatBytesIEC(0) == "0 B");
  CHECK(FormatBytesIEC(512) == "512 B");
  CHECK(FormatBytesIEC(0.25) == "0.3 B");
  CHECK(FormatBytesIEC(1023) == "1023 B");
  CHECK(FormatBytesIEC(1024) == "1 KiB");
  CHECK(FormatBytesIEC(1536) == "1.5 KiB");
  CHECK(FormatBytesIEC(340 * 1024) == "340 KiB");
  CHECK(FormatBytesIEC(1023.96 * 1024) == "1 MiB");  // rounds up into the next unit
  CHECK(FormatBytesIEC(1.8 * 1024 * 1024 * 1024) == "1.8 GiB");
  CHECK(FormatBytesIEC(21.0 * (1ull << 30)) == "21 GiB");
  CHECK(FormatBytesIEC(18446744073709551615.0) == "16 EiB");
  CHECK(FormatBytesIEC(1e30) == "867361737988.4 EiB");
}

TEST_CASE("FormatBytesIEC keeps the minus sign and never prints -0", "[format]") {
  CHECK(FormatBytesIEC(-2048) == "-2 KiB");
  CHECK(FormatBytesIEC(-1.5 * 1024 * 1024) == "-1.5 MiB");
  CHECK(FormatBytesIEC(-0.01) == "0 B");
  CHECK(FormatBytesIEC(-0.0) == "0 B");
}

}  // namespace
}  // namespace kpath
