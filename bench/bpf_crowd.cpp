// kpath-bench-bpf-crowd: a host crowded with other agents' BPF programs. Loads N trivial
// programs (r0 = 0; exit), each named kb_crowd_<i>, and attaches each to a raw tracepoint that
// rarely fires (default sched_process_hang), as an agent's hooks would be; holds them until its
// stdin closes or SIGTERM/SIGINT, then closes everything (the kernel frees the programs).
//
//   kpath-bench-bpf-crowd --programs N [--tracepoint EVENT | --no-attach]
//
// Prints "ready <N>" once all are loaded (and attached).
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
volatile sig_atomic_t stop = 0;
void OnSignal(int) { stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  int programs = 100;
  std::string tracepoint = "sched_process_hang";
  bool attach = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--programs" && i + 1 < argc) {
      programs = std::atoi(argv[++i]);
    } else if (a == "--tracepoint" && i + 1 < argc) {
      tracepoint = argv[++i];
    } else if (a == "--no-attach") {
      attach = false;
    } else {
      std::fprintf(stderr, "usage: %s --programs N [--tracepoint EVENT | --no-attach]\n", argv[0]);
      return 2;
    }
  }
  prctl(PR_SET_NAME, "kpath-bench-crw", 0, 0, 0);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  const bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  std::vector<int> fds;
  int status = 0;
  for (int i = 0; i < programs; ++i) {
    char name[BPF_OBJ_NAME_LEN];
    std::snprintf(name, sizeof(name), "kb_crowd_%u", static_cast<unsigned>(i) % 1000000u);
    int prog = bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, name, "GPL", insns, 2, nullptr);
    if (prog < 0) {
      std::fprintf(stderr, "kpath-bench-bpf-crowd: load %s: %s\n", name, std::strerror(-prog));
      status = 1;
      break;
    }
    fds.push_back(prog);
    if (attach) {
      int link = bpf_raw_tracepoint_open(tracepoint.c_str(), prog);
      if (link < 0) {
        std::fprintf(stderr, "kpath-bench-bpf-crowd: attach %s to %s: %s\n", name,
                     tracepoint.c_str(), std::strerror(-link));
        status = 1;
        break;
      }
      fds.push_back(link);
    }
  }
  if (status == 0) {
    std::printf("ready %d\n", programs);
    std::fflush(stdout);
    pollfd in{.fd = STDIN_FILENO, .events = POLLIN, .revents = 0};
    char buffer[64];
    while (!stop) {
      int n = poll(&in, 1, 200);
      if (n > 0 && read(STDIN_FILENO, buffer, sizeof(buffer)) <= 0) break;
    }
  }
  for (auto it = fds.rbegin(); it != fds.rend(); ++it) close(*it);
  return status;
}
