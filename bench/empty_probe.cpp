// kpath-bench-empty: attaches an empty BPF program to each hook named on the command line and
// holds it until SIGINT/SIGTERM. Hooks: tp_btf:<event>, raw_tp:<event>,
// tracepoint:<category>:<event>. Prints "attached <hook> prog_id <id>" per hook.
// A hook written touch<S>x<L>[w<W>]+tp_btf:<event> (or +raw_tp:) gets the touch program instead:
// L random cache lines of the first W (default S) of a map of S lines each event
// (bench/memory_floor.py).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "empty_probe.skel.h"

namespace {
volatile sig_atomic_t stop = 0;
void OnSignal(int) { stop = 1; }

struct Attached {
  empty_probe_bpf* skel = nullptr;
  bpf_link* link = nullptr;
};

// "touch<slots>x<lines>[w<window>]+": the touch program's map size, lines per event and the
// first lines of the map they are drawn from (all of it by default); false if malformed.
bool ParseTouch(const std::string& spec, uint32_t& slots, uint32_t& lines, uint32_t& window) {
  unsigned long s = 0, l = 0, w = 0;
  char next = 0;
  auto power_of_two = [](unsigned long v) { return v != 0 && (v & (v - 1)) == 0; };
  if (std::sscanf(spec.c_str(), "touch%lux%lu%c", &s, &l, &next) != 3) return false;
  if (next == 'w') {
    if (std::sscanf(spec.c_str(), "touch%lux%luw%lu%c", &s, &l, &w, &next) != 4) return false;
  } else {
    w = s;
  }
  if (next != '+' || !power_of_two(s) || !power_of_two(w) || w > s || s > (1UL << 24) || l == 0 ||
      l > 8) {
    return false;
  }
  slots = static_cast<uint32_t>(s);
  lines = static_cast<uint32_t>(l);
  window = static_cast<uint32_t>(w);
  return true;
}

bool AttachOne(const std::string& spec, Attached& out) {
  uint32_t slots = 1, lines = 0, window = 1;
  std::string hook = spec;
  if (spec.starts_with("touch")) {
    if (!ParseTouch(spec, slots, lines, window)) return false;
    hook = spec.substr(spec.find('+') + 1);
  }
  size_t colon = hook.find(':');
  if (colon == std::string::npos) return false;
  std::string kind = hook.substr(0, colon), target = hook.substr(colon + 1);
  if (lines && kind == "tracepoint") return false;
  empty_probe_bpf* skel = empty_probe_bpf__open();
  if (!skel) return false;
  bpf_program* chosen =
      kind == "tp_btf"   ? (lines ? skel->progs.touch_tp_btf : skel->progs.empty_tp_btf)
      : kind == "raw_tp" ? (lines ? skel->progs.touch_raw_tp : skel->progs.empty_raw_tp)
                         : skel->progs.empty_tracepoint;
  skel->rodata->lines = lines;
  skel->rodata->slot_mask = window - 1;
  if (bpf_map__set_max_entries(skel->maps.table, slots) != 0) {
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
  std::printf("ready\n");
  std::fflush(stdout);
  while (!stop) pause();
  for (auto& x : all) {
    bpf_link__destroy(x.link);
    empty_probe_bpf__destroy(x.skel);
  }
  return 0;
}
