// kpath-bench-empty: attaches an empty BPF program to each hook named on the command line and
// holds it until SIGINT/SIGTERM. Hooks: tp_btf:<event>, raw_tp:<event>,
// tracepoint:<category>:<event>. Prints "attached <hook> prog_id <id>" per hook.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

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

bool AttachOne(const std::string& hook, Attached& out) {
  size_t colon = hook.find(':');
  if (colon == std::string::npos) return false;
  std::string kind = hook.substr(0, colon), target = hook.substr(colon + 1);
  empty_probe_bpf* skel = empty_probe_bpf__open();
  if (!skel) return false;
  bpf_program* chosen = kind == "tp_btf"   ? skel->progs.empty_tp_btf
                        : kind == "raw_tp" ? skel->progs.empty_raw_tp
                                           : skel->progs.empty_tracepoint;
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
  std::printf("attached %s prog_id %u\n", hook.c_str(), info.id);
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
