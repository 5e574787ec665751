// The `hooks:` section of the configuration: defaults, the three BPF statistics modes, the
// hot-function list, and the errors a wrong value gets.
#include <catch2/catch.hpp>

#include "config_parse.h"
#include "daemon/config.h"

using namespace kpath;
using kpath::testing::ErrorOf;
using kpath::testing::Parse;

TEST_CASE("hooks defaults: refreshed every 15 s, sampled BPF statistics, seed 002's hot functions",
          "[hooks][config]") {
  HooksConfig hooks = Config{}.hooks;
  CHECK(hooks.enabled);
  CHECK(hooks.refresh_interval == absl::Seconds(15));
  CHECK(hooks.bpf_stats == BpfStatsMode::kSampled);
  CHECK(hooks.bpf_stats_slice == absl::Seconds(1));
  CHECK(hooks.max_info_series == 200);
  auto has = [&](const std::string& name) {
    return std::find(hooks.hot_functions.begin(), hooks.hot_functions.end(), name) !=
           hooks.hot_functions.end();
  };
  CHECK(has("security_file_permission"));
  CHECK(has("vfs_read"));
  CHECK(has("tcp_sendmsg"));
  CHECK(has("sched:sched_switch"));
  CHECK(has("raw_syscalls:sys_enter"));
}

TEST_CASE("hooks settings parse, and the hot list replaces the default one", "[hooks][config]") {
  Config config = Parse(
      "hooks:\n"
      "  enabled: false\n"
      "  refresh_interval: 5s\n"
      "  bpf_stats: always\n"
      "  bpf_stats_slice: 500ms\n"
      "  max_info_series: 50\n"
      "  top_programs: 10\n"
      "  hot_functions: [vfs_read, 'sched:sched_switch', finish_task_switch.isra.0]\n");
  CHECK_FALSE(config.hooks.enabled);
  CHECK(config.hooks.refresh_interval == absl::Seconds(5));
  CHECK(config.hooks.bpf_stats == BpfStatsMode::kAlways);
  CHECK(config.hooks.bpf_stats_slice == absl::Milliseconds(500));
  CHECK(config.hooks.max_info_series == 50);
  CHECK(config.hooks.top_programs == 10);
  CHECK(config.hooks.hot_functions ==
        std::vector<std::string>{"vfs_read", "sched:sched_switch", "finish_task_switch.isra.0"});
  CHECK(Parse("hooks:\n  bpf_stats: 'off'\n").hooks.bpf_stats == BpfStatsMode::kOff);
  CHECK(Parse("hooks:\n  hot_functions: []\n").hooks.hot_functions.empty());
}

TEST_CASE("the default statistics slice follows a short refresh interval, and a set one is checked",
          "[hooks][config]") {
  CHECK(Parse("hooks:\n  refresh_interval: 1s\n").hooks.bpf_stats_slice == absl::Milliseconds(200));
  CHECK(
      ErrorOf("hooks:\n  refresh_interval: 2s\n  bpf_stats_slice: 2s\n") ==
      "kpathd.yaml:3: hooks.bpf_stats_slice (2s) must be shorter than hooks.refresh_interval (2s)");
}

TEST_CASE("wrong hooks values are errors naming the line and key", "[hooks][config]") {
  CHECK(ErrorOf("hooks:\n  bpf_stats: sometimes\n") ==
        "kpathd.yaml:2: hooks.bpf_stats: expected off, always or sampled, got \"sometimes\"");
  CHECK(ErrorOf("hooks:\n  refresh_interval: 10ms\n") ==
        "kpathd.yaml:2: hooks.refresh_interval: must be from 500ms to 1h, got 10ms");
  CHECK(ErrorOf("hooks:\n  max_info_series: 0\n") ==
        "kpathd.yaml:2: hooks.max_info_series: must be from 1 to 10000, got 0");
  CHECK(ErrorOf("hooks:\n  hot_functions: vfs_read\n") ==
        "kpathd.yaml:2: hooks.hot_functions: expected a list of function names or "
        "category:event tracepoints, got \"vfs_read\"");
  CHECK(ErrorOf("hooks:\n  hot_functions: [vfs_read, 'a b']\n") ==
        "kpathd.yaml:2: hooks.hot_functions: expected a function name or category:event, got "
        "\"a b\"");
  CHECK(ErrorOf("hooks:\n  refresh: 1s\n").find("unknown key \"refresh\" in \"hooks\"") !=
        std::string::npos);
}
