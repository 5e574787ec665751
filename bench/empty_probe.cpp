// kpath-bench-empty: attaches an empty BPF program to each hook named on the command line and
// holds it until SIGINT/SIGTERM. Hooks: tp_btf:<event>, raw_tp:<event>,
// tracepoint:<category>:<event>. Prints "attached <hook> prog_id <id>" per hook.
// A hook written touch<S>x<L>[w<W>[s<D>]]+tp_btf:<event> (or +raw_tp:) gets the touch program
// instead: L random cache lines each event of W (default S) lines D (default 1) apart in a map of
// S lines (bench/memory_floor.py). log<N>[t][r]+tp_btf:<event> gets the log program: a
// 16-byte record each event after the CPU's last, in a region of N lines per CPU; with t, the
// record carries bpf_ktime_get_ns(); with r, a thread of this process reads every line every
// 100 ms, as a reader draining the logs would.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "empty_probe.skel.h"

namespace {
volatile sig_atomic_t stop = 0;
void OnSignal(int) { stop = 1; }

struct Attached {
  empty_probe_bpf* skel = nullptr;
  bpf_link* link = nullptr;
  void* log = nullptr;  // the log map, mmap'ed for its reader
  size_t log_bytes = 0;
};

std::atomic<bool> reading{true};

// Reads every word of the mapped logs every 100 ms until `reading` ends.
void ReadLogs(std::vector<std::pair<const uint64_t*, size_t>> logs) {
  uint64_t sum = 0;
  while (reading.load()) {
    for (const auto& [words, n] : logs) {
      for (size_t i = 0; i < n; ++i) sum += __atomic_load_n(&words[i], __ATOMIC_RELAXED);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (sum == 1) std::printf("\n");  // keeps the reads
}

// "log<lines>[t][r]+": the log program's lines per CPU (a power of two), whether its records
// carry a time, and whether a thread reads them.
bool ParseLog(const std::string& spec, unsigned long& lines, bool& time, bool& read) {
  int end = 0;
  if (std::sscanf(spec.c_str(), "log%lu%n", &lines, &end) != 1) return false;
  std::string_view flags = std::string_view(spec).substr(end, spec.find('+') - end);
  time = flags.find('t') != std::string_view::npos;
  read = flags.find('r') != std::string_view::npos;
  return flags.size() == size_t{time} + size_t{read} && lines != 0 && (lines & (lines - 1)) == 0 &&
         lines <= (1UL << 20);
}

// "touch<slots>x<lines>[w<window>[s<stride>]]+": the touch program's map size in lines, lines
// per event, and the window they are drawn from: `window` lines `stride` apart from the map's
// first (all of it, 1 apart, by default); false if malformed.
struct Touch {
  unsigned long slots = 1, lines = 0, window = 1, stride = 1;
};

bool ParseTouch(const std::string& spec, Touch& t) {
  char next = 0;
  auto power_of_two = [](unsigned long v) { return v != 0 && (v & (v - 1)) == 0; };
  if (std::sscanf(spec.c_str(), "touch%lux%lu%c", &t.slots, &t.lines, &next) != 3) return false;
  t.window = t.slots;
  if (next == 'w' &&
      std::sscanf(spec.c_str(), "touch%lux%luw%lu%c", &t.slots, &t.lines, &t.window, &next) != 4) {
    return false;
  }
  if (next == 's' && std::sscanf(spec.c_str(), "touch%lux%luw%lus%lu%c", &t.slots, &t.lines,
                                 &t.window, &t.stride, &next) != 5) {
    return false;
  }
  return next == '+' && power_of_two(t.slots) && power_of_two(t.window) && t.stride >= 1 &&
         (t.window - 1) * t.stride < t.slots && t.slots <= (1UL << 24) && t.lines >= 1 &&
         t.lines <= 8;
}

bool AttachOne(const std::string& spec, Attached& out) {
  Touch touch;
  unsigned long log_lines = 0;
  bool log_read = false, log_time = false;
  std::string hook = spec;
  if (spec.starts_with("touch")) {
    if (!ParseTouch(spec, touch)) return false;
    hook = spec.substr(spec.find('+') + 1);
  } else if (spec.starts_with("log")) {
    if (!ParseLog(spec, log_lines, log_time, log_read)) return false;
    hook = spec.substr(spec.find('+') + 1);
  }
  size_t colon = hook.find(':');
  if (colon == std::string::npos) return false;
  std::string kind = hook.substr(0, colon), target = hook.substr(colon + 1);
  const bool touching = touch.lines != 0;
  if ((touching || log_lines) && kind != "tp_btf" && kind != "raw_tp") return false;
  if (log_lines && kind != "tp_btf") return false;
  empty_probe_bpf* skel = empty_probe_bpf__open();
  if (!skel) return false;
  bpf_program* chosen =
      log_lines          ? skel->progs.log_tp_btf
      : kind == "tp_btf" ? (touching ? skel->progs.touch_tp_btf : skel->progs.empty_tp_btf)
      : kind == "raw_tp" ? (touching ? skel->progs.touch_raw_tp : skel->progs.empty_raw_tp)
                         : skel->progs.empty_tracepoint;
  skel->rodata->lines = static_cast<uint32_t>(touch.lines);
  skel->rodata->slot_mask = static_cast<uint32_t>(touch.window - 1);
  skel->rodata->stride = static_cast<uint32_t>(touch.stride);
  const int cpus = libbpf_num_possible_cpus();
  skel->rodata->log_mask = static_cast<uint32_t>(log_lines ? log_lines - 1 : 0);
  skel->rodata->log_lines_per_cpu = static_cast<uint32_t>(log_lines ? log_lines : 1);
  skel->rodata->log_time = log_time;
  const uint32_t log_entries = static_cast<uint32_t>(log_lines ? log_lines * cpus : 1);
  if (cpus <= 0 || bpf_map__set_max_entries(skel->maps.event_log, log_entries) != 0 ||
      bpf_map__set_max_entries(skel->maps.table, static_cast<uint32_t>(touch.slots)) != 0) {
    empty_probe_bpf__destroy(skel);
    return false;
  }
  bpf_program* p = nullptr;
  bpf_object__for_each_program(p, skel->obj) bpf_program__set_autoload(p, p == chosen);
  if (kind == "tp_btf" && bpf_program__set_attach_target(chosen, 0, target.c_str()) != 0) {
    empty_probe_bpf__destroy(skel);
    return false;
  }
  if (empty_probe_bpf__load(skel) != 0) {
    empty_probe_bpf__destroy(skel);
    return false;
  }
  bpf_link* link = nullptr;
  if (kind == "tp_btf") {
    link = bpf_program__attach(chosen);
  } else if (kind == "raw_tp") {
    link = bpf_program__attach_raw_tracepoint(chosen, target.c_str());
  } else {
    size_t c2 = target.find(':');
    if (c2 != std::string::npos) {
      link = bpf_program__attach_tracepoint(chosen, target.substr(0, c2).c_str(),
                                            target.substr(c2 + 1).c_str());
    }
  }
  if (!link) {
    empty_probe_bpf__destroy(skel);
    return false;
  }
  bpf_prog_info info{};
  __u32 len = sizeof(info);
  bpf_obj_get_info_by_fd(bpf_program__fd(chosen), &info, &len);
  std::printf("attached %s prog_id %u\n", spec.c_str(), info.id);
  std::fflush(stdout);
  out = {skel, link};
  if (log_read) {
    out.log_bytes = (size_t{log_entries} * 64 + 4095) / 4096 * 4096;
    out.log =
        mmap(nullptr, out.log_bytes, PROT_READ, MAP_SHARED, bpf_map__fd(skel->maps.event_log), 0);
    if (out.log == MAP_FAILED) {
      out.log = nullptr;
      bpf_link__destroy(link);
      empty_probe_bpf__destroy(skel);
      return false;
    }
  }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_NAME, "kpath-bench-emp");
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  std::vector<Attached> all;
  for (int i = 1; i < argc; ++i) {
    Attached a;
    if (!AttachOne(argv[i], a)) {
      std::fprintf(stderr, "kpath-bench-empty: cannot attach %s: %s\n", argv[i],
                   std::strerror(errno));
      for (auto& x : all) {
        bpf_link__destroy(x.link);
        empty_probe_bpf__destroy(x.skel);
      }
      return 1;
    }
    all.push_back(a);
  }
  std::vector<std::pair<const uint64_t*, size_t>> logs;
  for (const Attached& a : all) {
    if (a.log) logs.emplace_back(static_cast<const uint64_t*>(a.log), a.log_bytes / 8);
  }
  std::thread reader;
  if (!logs.empty()) {  // signals go to the main thread, whose pause() they end
    sigset_t all_signals, old;
    sigfillset(&all_signals);
    pthread_sigmask(SIG_BLOCK, &all_signals, &old);
    reader = std::thread(ReadLogs, logs);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  std::printf("ready\n");
  std::fflush(stdout);
  while (!stop) pause();
  reading = false;
  if (reader.joinable()) reader.join();
  for (auto& x : all) {
    if (x.log) munmap(x.log, x.log_bytes);
    bpf_link__destroy(x.link);
    empty_probe_bpf__destroy(x.skel);
  }
  return 0;
}
