// A test-only stand-in for a third-party observability or security agent: it places hooks the
// way such agents do, so that the foreign-hook inventory can be tested on the real kernel.
//
//   hook_agent --print-uprobe-target
//       prints "<this binary>:0x<file offset>" of hook_agent_probe_target(), where the test
//       defines a tracefs uprobe event, and exits
//   hook_agent [--uprobe-event GROUP/EVENT] [--kprobe FUNCTION]
//       attaches sched:sched_switch (classic tracepoint), task_newtask (raw tracepoint),
//       sched_process_fork (tp_btf) and, with --uprobe-event, a uprobe program to that tracefs
//       event through perf_event_open; with --kprobe, a BPF kprobe on that kernel function (seed
//       002's hook; kernels with CONFIG_KPROBES only); calls the probed function every
//       millisecond; prints "ready" and runs until its stdin closes or SIGTERM, then detaches
//       everything.
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hook_agent.skel.h"

extern "C" __attribute__((noinline, used)) int hook_agent_probe_target(int x) {
  asm volatile("" ::: "memory");  // keeps the call and the function
  return x + 1;
}

namespace {

// The file offset of hook_agent_probe_target in this binary, from the mapping that holds it.
std::string UprobeTarget() {
  auto address = reinterpret_cast<uintptr_t>(&hook_agent_probe_target);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    uintptr_t start = 0, end = 0;
    unsigned long long offset = 0;
    char path[4096] = {};
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %*s %llx %*s %*s %4095s", &start, &end,
                    &offset, path) != 4) {
      continue;
    }
    if (address >= start && address < end && path[0] == '/') {
      char out[4200];
      std::snprintf(out, sizeof(out), "%s:0x%llx", path,
                    static_cast<unsigned long long>(address - start + offset));
      return out;
    }
  }
  return {};
}

std::string TracefsRoot() {
  for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    if (access((std::string(dir) + "/events").c_str(), F_OK) == 0) return dir;
  }
  return {};
}

// Opens the tracefs event as a perf event (all processes, CPU 0, as libbpf's legacy mode does).
int OpenTracefsEvent(const std::string& event) {
  std::ifstream id_file(TracefsRoot() + "/events/" + event + "/id");
  long long id = -1;
  if (!(id_file >> id)) return -ENOENT;
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = static_cast<uint64_t>(id);
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
  return fd >= 0 ? fd : -errno;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--print-uprobe-target") == 0) {
    std::string target = UprobeTarget();
    if (target.empty()) return 1;
    std::printf("%s\n", target.c_str());
    return 0;
  }
  std::string uprobe_event;
  std::string kprobe_function;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--uprobe-event") == 0) uprobe_event = argv[i + 1];
    if (std::strcmp(argv[i], "--kprobe") == 0) kprobe_function = argv[i + 1];
  }

  hook_agent_bpf* skel = hook_agent_bpf__open();
  if (skel == nullptr) {
    std::fprintf(stderr, "hook_agent: open: %s\n", std::strerror(errno));
    return 1;
  }
  bpf_program__set_autoload(skel->progs.agent_kprobe, !kprobe_function.empty());
  // tp_btf needs the kernel's BTF (5.5+, and not every kernel has it: 4.19 never does).
  const bool btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
  bpf_program__set_autoload(skel->progs.agent_btf_fork, btf);
  if (int err = hook_agent_bpf__load(skel); err != 0) {
    std::fprintf(stderr, "hook_agent: load: %s\n", std::strerror(-err));
    return 1;
  }
  std::vector<bpf_link*> links;
  for (bpf_program* prog :
       {skel->progs.agent_tp_switch, skel->progs.agent_raw_newtask, skel->progs.agent_btf_fork}) {
    if (!bpf_program__autoload(prog)) continue;
    bpf_link* link = bpf_program__attach(prog);
    if (link == nullptr) {
      std::fprintf(stderr, "hook_agent: attach %s: %s\n", bpf_program__name(prog),
                   std::strerror(errno));
      return 1;
    }
    links.push_back(link);
  }
  if (!uprobe_event.empty()) {
    int fd = OpenTracefsEvent(uprobe_event);
    if (fd < 0) {
      std::fprintf(stderr, "hook_agent: perf_event_open %s: %s\n", uprobe_event.c_str(),
                   std::strerror(-fd));
      return 1;
    }
    // The link owns the perf fd from here on.
    bpf_link* link = bpf_program__attach_perf_event(skel->progs.agent_uprobe, fd);
    if (link == nullptr) {
      std::fprintf(stderr, "hook_agent: attach uprobe: %s\n", std::strerror(errno));
      close(fd);
      return 1;
    }
    links.push_back(link);
  }
  if (!kprobe_function.empty()) {
    bpf_link* link =
        bpf_program__attach_kprobe(skel->progs.agent_kprobe, false, kprobe_function.c_str());
    if (link == nullptr) {
      std::fprintf(stderr, "hook_agent: attach kprobe %s: %s\n", kprobe_function.c_str(),
                   std::strerror(errno));
      return 1;
    }
    links.push_back(link);
  }

  std::atomic<bool> stop{false};
  std::thread caller([&stop] {
    int x = 0;
    while (!stop.load()) {
      x = hook_agent_probe_target(x);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::printf("ready\n");
  std::fflush(stdout);

  // Until the test closes our stdin (or kills us).
  char buffer[64];
  while (read(STDIN_FILENO, buffer, sizeof(buffer)) > 0) {
  }
  stop.store(true);
  caller.join();
  for (bpf_link* link : links) bpf_link__destroy(link);
  unsigned long long runs[5] = {};
  for (__u32 i = 0; i < 5; ++i) {
    __u64 n = 0;
    if (bpf_map__lookup_elem(skel->maps.runs, &i, sizeof(i), &n, sizeof(n), 0) == 0) runs[i] = n;
  }
  std::fprintf(stderr, "hook_agent: runs tp=%llu raw_tp=%llu tp_btf=%llu uprobe=%llu kprobe=%llu\n",
               runs[0], runs[1], runs[2], runs[3], runs[4]);
  hook_agent_bpf__destroy(skel);
  return 0;
}
