#include "daemon/config.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "config_parse.h"

namespace Catch {
// Failed equality checks print the settings instead of "{?}".
template <>
struct StringMaker<kpath::Config> {
  static std::string convert(const kpath::Config& c) {
    std::ostringstream out;
    out << "{listen_address=" << c.listen_address << " log_level=" << c.log_level
        << " sampling_interval=" << absl::FormatDuration(c.sampling_interval)
        << " procfs=" << c.procfs_root << " sysfs=" << c.sysfs_root
        << " percpu_growth_window=" << absl::FormatDuration(c.percpu.growth_window) << " labels={"
        << c.labels.comm << "," << c.labels.caller << "," << c.labels.unit
        << "} bpf_enabled=" << c.bpf_enabled
        << " selftest_interval=" << absl::FormatDuration(c.selftest_interval) << " probes={";
    for (const auto& [name, probe] : c.probes) {
      out << name << ":{enabled=" << probe.enabled << " mechanisms=[";
      for (kpath::Mechanism m : probe.mechanisms) out << kpath::MechanismName(m) << " ";
      out << "]}";
    }
    out << "}}";
    return out.str();
  }
};
}  // namespace Catch

namespace kpath {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using testing::ErrorOf;
using testing::Parse;

const std::string kShippedFile = KPATH_SOURCE_DIR "/config/kpathd.yaml";
const std::string kFixtures = KPATH_FIXTURES "/config/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A temporary file removed when the test ends, pass or fail.
class TempFile {
 public:
  TempFile(const std::string& contents, mode_t mode) {
    char name[] = "/tmp/kpathd_config_test_XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    path_ = name;
    REQUIRE(write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size()));
    REQUIRE(fchmod(fd, mode) == 0);  // fchmod ignores the umask
    close(fd);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::vector<Mechanism> kAllPercpuMechanisms = {Mechanism::kTpBtf, Mechanism::kRawTp,
                                                     Mechanism::kTracepoint, Mechanism::kFentry,
                                                     Mechanism::kKprobe};

// --- Defaults and the shipped file ---

TEST_CASE("the shipped config/kpathd.yaml equals the built-in defaults") {
  CHECK(Parse(ReadFile(kShippedFile)) == Config{});
  absl::StatusOr<Config> loaded = LoadConfigFile(kShippedFile);
  REQUIRE(loaded.ok());
  CHECK(*loaded == Config{});
}

TEST_CASE("the shipped config/kpathd.yaml spells out every setting") {
  const YAML::Node file = YAML::LoadFile(kShippedFile);
  std::set<std::string> keys;
  for (const auto& top : file) {
    keys.insert(top.first.Scalar());
    if (!top.second.IsMap()) continue;
    for (const auto& nested : top.second) {
      const std::string path = top.first.Scalar() + "." + nested.first.Scalar();
      keys.insert(path);
      if (!nested.second.IsMap()) continue;
      for (const auto& leaf : nested.second) keys.insert(path + "." + leaf.first.Scalar());
    }
  }
  const std::set<std::string> expected = {"listen_address",
                                          "log_level",
                                          "sampling_interval",
                                          "paths",
                                          "paths.procfs",
                                          "paths.sysfs",
                                          "meminfo",
                                          "meminfo.percpu_growth_window",
                                          "percpu",
                                          "percpu.max_tracked_allocations",
                                          "percpu.caller_from_stack",
                                          "madvise",
                                          "madvise.storm_calls_per_second",
                                          "cgroups",
                                          "cgroups.churn_burst_per_second",
                                          "labels",
                                          "labels.comm",
                                          "labels.caller",
                                          "labels.unit",
                                          "labels.pod",
                                          "kubernetes",
                                          "kubernetes.pod_labels",
                                          "kubernetes.attribute_by",
                                          "kubernetes.pod_logs",
                                          "kubernetes.container_logs",
                                          "bpf",
                                          "bpf.enabled",
                                          "bpf.selftest_interval",
                                          "hooks",
                                          "hooks.enabled",
                                          "hooks.refresh_interval",
                                          "hooks.max_info_series",
                                          "hooks.top_programs",
                                          "hooks.bpf_stats",
                                          "hooks.bpf_stats_slice",
                                          "hooks.hot_functions",
                                          "irqoff",
                                          "irqoff.threshold",
                                          "irqoff.period",
                                          "irqoff.max_window",
                                          "irqoff.ignore_vm_pauses",
                                          "slab",
                                          "slab.caches",
                                          "slab.top_n",
                                          "slab.interval",
                                          "slab.max_read_time",
                                          "probes",
                                          "probes.percpu_alloc",
                                          "probes.percpu_alloc.enabled",
                                          "probes.percpu_alloc.mechanisms",
                                          "probes.cgroup_churn",
                                          "probes.cgroup_churn.enabled",
                                          "probes.cgroup_churn.mechanisms",
                                          "probes.madvise",
                                          "probes.madvise.enabled",
                                          "probes.madvise.mechanisms",
                                          "probes.tlb_flush",
                                          "probes.tlb_flush.enabled",
                                          "probes.tlb_flush.mechanisms",
                                          "probes.irqoff",
                                          "probes.irqoff.enabled",
                                          "probes.irqoff.mechanisms",
                                          "probes.slabinfo_readers",
                                          "probes.slabinfo_readers.enabled",
                                          "probes.slabinfo_readers.mechanisms",
                                          "web",
                                          "web.config_file",
                                          "web.keep_alive_timeout",
                                          "web.max_connections",
                                          "web.request_timeout"};
  CHECK(keys == expected);
}

TEST_CASE("the default settings are the documented ones") {
  const Config config;
  CHECK(config.listen_address == "0.0.0.0:9477");
  CHECK(config.log_level == "info");
  CHECK(config.sampling_interval == absl::Seconds(5));
  CHECK(config.procfs_root == "/proc");
  CHECK(config.sysfs_root == "/sys");
  CHECK(config.percpu.growth_window == absl::Seconds(60));
  CHECK(config.labels == LabelLimits{20, 20, 30});
  CHECK(config.bpf_enabled);
  CHECK(config.probes.empty());
  CHECK(config.web.config_file.empty());
  CHECK(config.web.max_connections == 128);
  CHECK(config.web.request_timeout == absl::Seconds(5));
  CHECK(config.web.keep_alive_timeout == absl::Seconds(75));
}

TEST_CASE("the web section: web configuration file, connection limits, timeouts") {
  const Config config = Parse(
      "web:\n  config_file: /etc/kpathd/web.yml\n  max_connections: 16\n  request_timeout: "
      "2s\n  keep_alive_timeout: 30s\n");
  CHECK(config.web.config_file == "/etc/kpathd/web.yml");
  CHECK(config.web.keep_alive_timeout == absl::Seconds(30));
  CHECK(Parse("web:\n  keep_alive_timeout: 0s\n").web.keep_alive_timeout == absl::ZeroDuration());
  CHECK(ErrorOf("web:\n  keep_alive_timeout: 1h\n") ==
        "kpathd.yaml:2: web.keep_alive_timeout: must be from 0 to 10m, got 1h");
  CHECK(config.web.max_connections == 16);
  CHECK(config.web.request_timeout == absl::Seconds(2));
  CHECK(Parse("web:\n  config_file: \"\"\n") == Config{});
  CHECK(Parse("web:\n  config_file:\n") == Config{});
  CHECK(ErrorOf("web:\n  config_file: web.yml\n") ==
        "kpathd.yaml:2: web.config_file: expected an absolute path, got \"web.yml\"");
  CHECK(ErrorOf("web:\n  max_connections: 2\n") ==
        "kpathd.yaml:2: web.max_connections: must be from 4 to 1024, got 2");
  CHECK(ErrorOf("web:\n  request_timeout: 10m\n") ==
        "kpathd.yaml:2: web.request_timeout: must be from 100ms to 5m, got 10m");
  CHECK_THAT(ErrorOf("web:\n  tls: on\n"),
             StartsWith("kpathd.yaml:2: unknown key \"tls\" in \"web\" (valid: config_file, "
                        "max_connections, request_timeout, keep_alive_timeout)"));
}

TEST_CASE("an empty, comment-only or null document gives the defaults") {
  CHECK(Parse("") == Config{});
  CHECK(Parse("\n\n") == Config{});
  CHECK(Parse("# nothing configured\n# at all\n") == Config{});
  CHECK(Parse("~\n") == Config{});
  CHECK(Parse("---\n") == Config{});
}

TEST_CASE("an empty section keeps that section's defaults") {
  CHECK(Parse("paths:\nmeminfo:\nlabels:\nbpf:\nprobes:\n") == Config{});
  CHECK(Parse("probes:\n  percpu_alloc:\n") == Config{});
}

TEST_CASE("every setting is read from the file") {
  const Config config = Parse(R"(
listen_address: "127.0.0.1:9500"
log_level: debug
sampling_interval: 500ms
paths:
  procfs: /host/proc
  sysfs: /host/sys
meminfo:
  percpu_growth_window: 2m
labels:
  comm: 5
  caller: 10000
  unit: 1
bpf:
  enabled: false
probes:
  percpu_alloc:
    enabled: false
)");
  CHECK(config.listen_address == "127.0.0.1:9500");
  CHECK(config.log_level == "debug");
  CHECK(config.sampling_interval == absl::Milliseconds(500));
  CHECK(config.procfs_root == "/host/proc");
  CHECK(config.sysfs_root == "/host/sys");
  CHECK(config.percpu.growth_window == absl::Minutes(2));
  CHECK(config.labels == LabelLimits{5, 10000, 1});
  CHECK_FALSE(config.bpf_enabled);
  CHECK_FALSE(config.Probe("percpu_alloc").enabled);
}

TEST_CASE("the percpu and madvise sections fill their own structs") {
  const Config config = Parse(
      "meminfo:\n  percpu_growth_window: 2m\npercpu:\n  max_tracked_allocations: 1024\n"
      "  caller_from_stack: true\nmadvise:\n  storm_calls_per_second: 7\n");
  CHECK(config.percpu == PercpuConfig{.growth_window = absl::Minutes(2),
                                      .max_tracked_allocations = 1024,
                                      .caller_from_stack = true});
  CHECK(config.madvise == MadviseConfig{.storm_calls_per_second = 7});
  CHECK(Parse("cgroups:\n  churn_burst_per_second: 3\n").cgroups ==
        CgroupsConfig{.churn_burst_per_second = 3});
  CHECK(ErrorOf("cgroups:\n  churn_burst_per_second: 0\n") ==
        "kpathd.yaml:2: cgroups.churn_burst_per_second: must be from 1 to 1000000, got 0");
  CHECK(ErrorOf("cgroups:\n  churn_burst_per_second: 2/s\n")
            .find("kpathd.yaml:2: cgroups.churn_burst_per_second:") == 0);
  CHECK(ErrorOf("percpu:\n  max_tracked_allocations: 1023\n") ==
        "kpathd.yaml:2: percpu.max_tracked_allocations: must be from 1024 to 4194304, got 1023");
}

// --- Keys ---

TEST_CASE("an unknown top-level key is an error naming file, line and key") {
  CHECK(ErrorOf("log_level: info\nsampling_interval: 5s\nno_such_key: 1\n") ==
        "kpathd.yaml:3: unknown key \"no_such_key\" (valid: listen_address, log_level, "
        "sampling_interval, paths, meminfo, percpu, madvise, cgroups, labels, kubernetes, bpf, "
        "hooks, irqoff, slab, probes, web)");
}

TEST_CASE("an unknown nested key is an error naming its section and the valid keys") {
  CHECK(ErrorOf("paths:\n  procfs: /proc\n  foo: /x\n") ==
        "kpathd.yaml:3: unknown key \"foo\" in \"paths\" (valid: procfs, sysfs)");
  CHECK(ErrorOf("labels:\n  pid: 5\n") ==
        "kpathd.yaml:2: unknown key \"pid\" in \"labels\" (valid: comm, caller, unit, pod)");
  CHECK(ErrorOf("kubernetes:\n  pod_labels: yes please\n") ==
        "kpathd.yaml:2: kubernetes.pod_labels: expected one of auto, on, off, got \"yes please\"");
  CHECK(ErrorOf("kubernetes:\n  pod_logs: var/log/pods\n").find("kubernetes.pod_logs") !=
        std::string::npos);
  CHECK(ErrorOf("probes:\n  percpu_alloc:\n    enable: false\n") ==
        "kpathd.yaml:3: unknown key \"enable\" in \"probes.percpu_alloc\" (valid: enabled, "
        "mechanisms)");
}

TEST_CASE("a repeated key is an error pointing at the repetition and the first one") {
  CHECK(ErrorOf("log_level: info\nsampling_interval: 5s\nlog_level: debug\n") ==
        "kpathd.yaml:3: duplicate key \"log_level\" (first on line 1)");
  CHECK(ErrorOf("labels:\n  comm: 5\n  unit: 5\n  comm: 6\n") ==
        "kpathd.yaml:4: duplicate key \"comm\" in \"labels\" (first on line 2)");
}

TEST_CASE("a key that is not a plain name is an error") {
  CHECK_THAT(ErrorOf("? [a, b]\n: 1\n"), StartsWith("kpathd.yaml:1: expected a setting name"));
}

// --- Document shape and YAML syntax ---

TEST_CASE("a YAML syntax error reports yaml-cpp's message at its line") {
  CHECK_THAT(ErrorOf("log_level: info\nlabels: [1,\n"), StartsWith("kpathd.yaml:"));
  CHECK(ErrorOf("log_level: info\nlisten_address: a: b\n") == "kpathd.yaml:2: illegal map value");
}

TEST_CASE("a top-level list or scalar is an error") {
  CHECK(ErrorOf("- listen_address: 0.0.0.0:9477\n") ==
        "kpathd.yaml:1: expected a mapping of settings at the top level, got a list");
  CHECK(ErrorOf("just some text\n") ==
        "kpathd.yaml:1: expected a mapping of settings at the top level, got \"just some text\"");
}

TEST_CASE("a second YAML document is an error, not silently ignored") {
  CHECK(ErrorOf("log_level: info\n---\nlog_level: debug\n") ==
        "kpathd.yaml:2: expected one YAML document, found a second one starting here");
  CHECK(kpath::ParseConfig("---\nlog_level: info\n...\n", "k.yaml").ok());
  CHECK(kpath::ParseConfig("---\n# nothing\n", "k.yaml").ok());
}

// --- Types ---

TEST_CASE("a wrong type is an error naming the key, what was expected and what was found") {
  CHECK(ErrorOf("log_level: info\nsampling_interval:\n  seconds: 5\n") ==
        "kpathd.yaml:2: sampling_interval: expected a duration such as 5s or 500ms, got a "
        "mapping");
  CHECK(ErrorOf("listen_address: [a, b]\n") ==
        "kpathd.yaml:1: listen_address: expected host:port such as 0.0.0.0:9477 or [::]:9477, "
        "got a list");
  CHECK(ErrorOf("paths: /proc\n") == "kpathd.yaml:1: paths: expected a mapping, got \"/proc\"");
  CHECK(ErrorOf("bpf:\n  enabled: maybe\n") ==
        "kpathd.yaml:2: bpf.enabled: expected true or false, got \"maybe\"");
  CHECK(ErrorOf("labels:\n  comm: twenty\n") ==
        "kpathd.yaml:2: labels.comm: expected a whole number, got \"twenty\"");
  CHECK(ErrorOf("log_level:\nsampling_interval: 5s\n") ==
        "kpathd.yaml:1: log_level: expected one of trace, debug, info, warn, error, critical, "
        "off, got nothing (null)");
}

TEST_CASE("bpf.selftest_interval: a minute by default, 1s to 1h") {
  CHECK(Parse("").selftest_interval == absl::Minutes(1));
  CHECK(Parse("bpf:\n  selftest_interval: 5s\n").selftest_interval == absl::Seconds(5));
  CHECK_THAT(ErrorOf("bpf:\n  selftest_interval: 500ms\n"),
             Catch::StartsWith("kpathd.yaml:2: bpf.selftest_interval:"));
  CHECK_THAT(ErrorOf("bpf:\n  selftest_interval: 2h\n"),
             Catch::StartsWith("kpathd.yaml:2: bpf.selftest_interval:"));
}

TEST_CASE("booleans accept YAML's spellings of true and false") {
  CHECK_FALSE(Parse("bpf:\n  enabled: false\n").bpf_enabled);
  CHECK_FALSE(Parse("bpf:\n  enabled: no\n").bpf_enabled);
  CHECK(Parse("bpf:\n  enabled: true\n").bpf_enabled);
}

// --- Values ---

TEST_CASE("a value that is not a duration is an error naming key and value") {
  CHECK(ErrorOf("log_level: info\n\n\n\nsampling_interval: abc\n") ==
        "kpathd.yaml:5: sampling_interval: expected a duration such as 5s or 500ms, got \"abc\"");
  CHECK_THAT(ErrorOf("sampling_interval: 5\n"), Contains("expected a duration"));
}

TEST_CASE("sampling_interval must be from 100ms to 1h") {
  CHECK(Parse("sampling_interval: 100ms\n").sampling_interval == absl::Milliseconds(100));
  CHECK(Parse("sampling_interval: 1m\nmeminfo:\n  percpu_growth_window: 2m\n").sampling_interval ==
        absl::Minutes(1));
  CHECK(ErrorOf("sampling_interval: 99ms\n") ==
        "kpathd.yaml:1: sampling_interval: must be from 100ms to 1h, got 99ms");
  CHECK(ErrorOf("sampling_interval: 0s\n") ==
        "kpathd.yaml:1: sampling_interval: must be from 100ms to 1h, got 0s");
  CHECK(ErrorOf("sampling_interval: -5s\n") ==
        "kpathd.yaml:1: sampling_interval: must be from 100ms to 1h, got -5s");
  CHECK(ErrorOf("sampling_interval: inf\n") ==
        "kpathd.yaml:1: sampling_interval: must be from 100ms to 1h, got inf");
  CHECK(ErrorOf("sampling_interval: 61m\n") ==
        "kpathd.yaml:1: sampling_interval: must be from 100ms to 1h, got 61m");
}

TEST_CASE("a growth window shorter than 2 x sampling_interval is an error at the window") {
  CHECK(ErrorOf("sampling_interval: 5s\nmeminfo:\n  percpu_growth_window: 9s\n") ==
        "kpathd.yaml:3: meminfo.percpu_growth_window (9s) must be at least 2 x "
        "sampling_interval (5s) = 10s, so that the growth rate is fitted over at least 2 "
        "samples");
  CHECK(Parse("sampling_interval: 5s\nmeminfo:\n  percpu_growth_window: 10s\n")
            .percpu.growth_window == absl::Seconds(10));
}

TEST_CASE("raising sampling_interval past half the default window is an error at the interval") {
  CHECK(ErrorOf("log_level: info\nsampling_interval: 31s\n") ==
        "kpathd.yaml:2: meminfo.percpu_growth_window (1m, the default) must be at least 2 x "
        "sampling_interval (31s) = 1m2s, so that the growth rate is fitted over at least 2 "
        "samples");
}

TEST_CASE("percpu_growth_window is at most 24h") {
  CHECK(Parse("meminfo:\n  percpu_growth_window: 24h\n").percpu.growth_window == absl::Hours(24));
  CHECK_THAT(ErrorOf("meminfo:\n  percpu_growth_window: 25h\n"),
             StartsWith("kpathd.yaml:2: meminfo.percpu_growth_window: must be from"));
}

TEST_CASE("label limits must be whole numbers from 1 to 10000") {
  CHECK(Parse("labels:\n  unit: 10000\n").labels.unit == 10000);
  CHECK(Parse("labels:\n  unit: 1\n").labels.unit == 1);
  CHECK(ErrorOf("labels:\n  unit: 0\n") ==
        "kpathd.yaml:2: labels.unit: must be from 1 to 10000, got 0");
  CHECK(ErrorOf("labels:\n  caller: -3\n") ==
        "kpathd.yaml:2: labels.caller: must be from 1 to 10000, got -3");
  CHECK(ErrorOf("labels:\n  comm: 10001\n") ==
        "kpathd.yaml:2: labels.comm: must be from 1 to 10000, got 10001");
  CHECK(ErrorOf("labels:\n  comm: 99999999999999999999\n") ==
        "kpathd.yaml:2: labels.comm: expected a whole number, got \"99999999999999999999\"");
  CHECK(ErrorOf("labels:\n  comm: 2.5\n") ==
        "kpathd.yaml:2: labels.comm: expected a whole number, got \"2.5\"");
}

TEST_CASE("log_level must be one of the spdlog level names") {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    CHECK(Parse(std::string("log_level: ") + level + "\n").log_level == level);
  }
  CHECK(ErrorOf("log_level: verbose\n") ==
        "kpathd.yaml:1: log_level: expected one of trace, debug, info, warn, error, critical, "
        "off, got \"verbose\"");
}

TEST_CASE("paths must be absolute") {
  CHECK(ErrorOf("paths:\n  sysfs: host/sys\n") ==
        "kpathd.yaml:2: paths.sysfs: expected an absolute path, got \"host/sys\"");
  CHECK_THAT(ErrorOf("paths:\n  procfs: \"\"\n"),
             StartsWith("kpathd.yaml:2: paths.procfs: expected an absolute path"));
}

TEST_CASE("listen_address accepts host:port and [ipv6]:port") {
  for (const char* address : {"0.0.0.0:9477", "127.0.0.1:1", "[::]:9477", "[::1]:65535",
                              "localhost:9477", "node-1.example.com:9477"}) {
    CHECK(Parse(std::string("listen_address: \"") + address + "\"\n").listen_address == address);
  }
}

TEST_CASE("a listen_address without host or with a bad port is an error saying what is wrong") {
  const struct {
    const char* address;
    const char* problem;
  } cases[] = {
      {"9477", "missing \":port\""},
      {":9477", "missing host"},
      {"[]:9477", "missing host"},
      {"0.0.0.0:", "the port must be a number from 1 to 65535, got \"\""},
      {"0.0.0.0:0", "the port must be a number from 1 to 65535, got \"0\""},
      {"0.0.0.0:65536", "the port must be a number from 1 to 65535, got \"65536\""},
      {"0.0.0.0:http", "got \"http\""},
      {"0.0.0.0:9477s", "got \"9477s\""},
      {"0.0.0.0:-1", "got \"-1\""},
      {"::1:9477", "an IPv6 address needs brackets"},
      {"[::1:9477", "unterminated \"[\""},
      {"[::1]9477", "expected \":port\" after \"]\""},
      {"a,b:9477", "comma or whitespace"},
      {"", "missing \":port\""},
  };
  for (const auto& c : cases) {
    const std::string message =
        ErrorOf(std::string("log_level: info\nlisten_address: \"") + c.address + "\"\n");
    INFO(message);
    CHECK_THAT(message, StartsWith(std::string("kpathd.yaml:2: listen_address: expected "
                                               "host:port such as 0.0.0.0:9477 or [::]:9477, "
                                               "got \"") +
                                   c.address + "\": "));
    CHECK_THAT(message, Contains(c.problem));
  }
}

// --- Probes ---

TEST_CASE("the known probes and their default mechanisms") {
  CHECK(KnownProbeNames() == std::vector<std::string_view>{"percpu_alloc", "cgroup_churn",
                                                           "madvise", "tlb_flush", "irqoff",
                                                           "slabinfo_readers"});
  CHECK(DefaultMechanisms("percpu_alloc") == kAllPercpuMechanisms);
  CHECK(DefaultMechanisms("no_such_probe").empty());
}

TEST_CASE("a probe not mentioned in the file gets the defaults") {
  const Config config;
  CHECK(config.probes.empty());
  CHECK(config.Probe("percpu_alloc").enabled);
  CHECK(config.Probe("percpu_alloc").mechanisms == kAllPercpuMechanisms);
}

TEST_CASE("madvise and slabinfo_readers leave their syscall tracepoints out unless asked for") {
  for (const std::string probe : {"madvise", "slabinfo_readers"}) {
    INFO(probe);
    CHECK(SupportedMechanisms(probe) ==
          std::vector<Mechanism>{Mechanism::kFentry, Mechanism::kKprobe, Mechanism::kTracepoint});
    CHECK(Config{}.Probe(probe).mechanisms ==
          std::vector<Mechanism>{Mechanism::kFentry, Mechanism::kKprobe});
    const Config asked = Parse("probes:\n  " + probe + ":\n    mechanisms: [tracepoint]\n");
    CHECK(asked.Probe(probe).mechanisms == std::vector<Mechanism>{Mechanism::kTracepoint});
    // The shipped defaults spelled out are still "no entry".
    CHECK(Parse("probes:\n  " + probe + ":\n    mechanisms: [fentry, kprobe]\n") == Config{});
  }
}

TEST_CASE("a mechanism restriction is kept in the order written") {
  const Config config = Parse("probes:\n  percpu_alloc:\n    mechanisms: [kprobe, tp_btf]\n");
  CHECK(config.Probe("percpu_alloc").enabled);
  CHECK(config.Probe("percpu_alloc").mechanisms ==
        std::vector<Mechanism>{Mechanism::kKprobe, Mechanism::kTpBtf});
  CHECK(Parse("probes:\n  percpu_alloc:\n    mechanisms:\n      - fentry\n")
            .Probe("percpu_alloc")
            .mechanisms == std::vector<Mechanism>{Mechanism::kFentry});
}

TEST_CASE("a probe entry spelling out the defaults is the same as no entry") {
  CHECK(Parse("probes:\n  percpu_alloc:\n    enabled: true\n    mechanisms: [tp_btf, raw_tp, "
              "tracepoint, fentry, kprobe]\n") == Config{});
  CHECK(Parse("probes:\n  percpu_alloc: {enabled: true}\n") == Config{});
}

TEST_CASE("a disabled probe is kept with its mechanisms") {
  const Config config =
      Parse("probes:\n  percpu_alloc:\n    enabled: false\n    mechanisms: [raw_tp]\n");
  CHECK(config.Probe("percpu_alloc") == ProbeConfig{false, {Mechanism::kRawTp}});
}

TEST_CASE("an unknown probe name is an error listing the known probes") {
  CHECK(ErrorOf("bpf:\n  enabled: true\nprobes:\n  percpu_allocs:\n    enabled: false\n") ==
        "kpathd.yaml:4: unknown probe \"percpu_allocs\" in \"probes\" (valid: percpu_alloc, "
        "cgroup_churn, madvise, tlb_flush, irqoff, slabinfo_readers)");
}

TEST_CASE("an unknown mechanism is an error at its line listing the probe's mechanisms") {
  CHECK(ErrorOf("probes:\n  percpu_alloc:\n    mechanisms:\n      - kprobe\n      - uprobe\n") ==
        "kpathd.yaml:5: probes.percpu_alloc.mechanisms: unknown mechanism \"uprobe\" "
        "(percpu_alloc can use: tp_btf, raw_tp, tracepoint, fentry, kprobe)");
}

TEST_CASE("a mechanism the probe does not implement is an error") {
  CHECK(ErrorOf("probes:\n  percpu_alloc:\n    mechanisms: [perf_event]\n") ==
        "kpathd.yaml:3: probes.percpu_alloc.mechanisms: percpu_alloc cannot attach through "
        "\"perf_event\" (it can use: tp_btf, raw_tp, tracepoint, fentry, kprobe)");
}

TEST_CASE("a mechanism listed twice is an error at the repetition") {
  CHECK(ErrorOf("probes:\n  percpu_alloc:\n    mechanisms:\n      - fentry\n      - kprobe\n"
                "      - fentry\n") ==
        "kpathd.yaml:6: probes.percpu_alloc.mechanisms: \"fentry\" is listed more than once");
}

TEST_CASE("an empty or non-list mechanisms value is an error") {
  const std::string expected_prefix =
      "kpathd.yaml:3: probes.percpu_alloc.mechanisms: expected a non-empty list drawn from "
      "[tp_btf, raw_tp, tracepoint, fentry, kprobe], got ";
  CHECK(ErrorOf("probes:\n  percpu_alloc:\n    mechanisms: []\n") == expected_prefix + "a list");
  CHECK(ErrorOf("probes:\n  percpu_alloc:\n    mechanisms: kprobe\n") ==
        expected_prefix + "\"kprobe\"");
  CHECK(ErrorOf("probes:\n  percpu_alloc:\n    mechanisms:\n") ==
        expected_prefix + "nothing (null)");
}

// --- Files ---

TEST_CASE("a config file is read and parsed with its path in errors") {
  absl::StatusOr<Config> good = LoadConfigFile(kFixtures + "local_ipv6_kprobe_only.yaml");
  REQUIRE(good.ok());
  CHECK(good->listen_address == "[::1]:9477");
  CHECK(good->sampling_interval == absl::Seconds(1));
  CHECK(good->Probe("percpu_alloc").mechanisms == std::vector<Mechanism>{Mechanism::kKprobe});

  const std::string bad_path = kFixtures + "typo_in_paths.yaml";
  absl::StatusOr<Config> bad = LoadConfigFile(bad_path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        bad_path + ":4: unknown key \"prcfs\" in \"paths\" (valid: procfs, sysfs)");
}

TEST_CASE("a missing config file is an error naming the path") {
  absl::StatusOr<Config> config = LoadConfigFile("/nonexistent/kpathd/kpathd.yaml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().message() ==
        "open /nonexistent/kpathd/kpathd.yaml: No such file or directory");
}

TEST_CASE("a directory given as the config file is an error naming the path") {
  absl::StatusOr<Config> config = LoadConfigFile("/tmp");
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().message() == "read /tmp: Is a directory");
}

TEST_CASE("a world-writable config file is refused") {
  const TempFile file("log_level: info\n", 0666);
  absl::StatusOr<Config> config = LoadConfigFile(file.path());
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().message() ==
        file.path() + ": refusing a world-writable config file (mode 0666); chmod o-w it");
}

TEST_CASE("a config file writable only by its owner and group is accepted") {
  const TempFile file("log_level: warn\n", 0660);
  absl::StatusOr<Config> config = LoadConfigFile(file.path());
  REQUIRE(config.ok());
  CHECK(config->log_level == "warn");
}

}  // namespace
}  // namespace kpath

TEST_CASE("input that once made yaml-cpp loop forever is refused at once", "[config][fuzz]") {
  // Found by tests/fuzz (config target): YAML::LoadAll never returned on it.
  absl::StatusOr<kpath::Config> c = kpath::ParseConfig(",sms: [kprobe]C\n", "kpathd.yaml");
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(std::string(c.status().message()), Catch::StartsWith("kpathd.yaml:1: "));
}
