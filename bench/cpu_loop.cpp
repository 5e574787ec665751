// The workloads of bench/irqoff_overhead.py and bench/workload_slowdown.py: a CPU-bound loop
// (what the IRQ-off detector's timer interrupts slow down), an open/close loop (what the
// slabinfo-reader tracepoint on every openat slows down) and a cgroup create/remove loop (seed
// 000's churn: each mkdir in a memory hierarchy allocates a memcg's per-CPU memory). Pinned to
// one CPU; prints iterations per second of the thread's own CPU time, then per wall-clock second.
//
//   kpath-bench-cpu-loop spin|openclose [--seconds S] [--cpu N]
//   kpath-bench-cpu-loop cgroup --dir PARENT [--seconds S] [--cpu N]
//     (one iteration: mkdir and rmdir of PARENT/kpath-loop-<pid>)
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s spin|openclose|cgroup [--dir D] [--seconds S] [--cpu N]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  double seconds = 1.0;
  int cpu = -1;
  std::string dir;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--cpu") == 0) cpu = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
  }
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::perror("sched_setaffinity");
      return 1;
    }
  }
  const auto wall_start = std::chrono::steady_clock::now();
  const auto wall_end = wall_start + std::chrono::duration<double>(seconds);
  const double cpu_start = ThreadCpuSeconds();
  uint64_t iterations = 0;
  if (mode == "spin") {
    // xorshift steps: integer work that stays in registers, checked against the clock rarely.
    volatile uint64_t sink = 0;
    uint64_t x = 88172645463325252ull;
    while (std::chrono::steady_clock::now() < wall_end) {
      for (int i = 0; i < 100000; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
      }
      iterations += 100000;
    }
    sink = x;
    (void)sink;
  } else if (mode == "openclose") {
    while (std::chrono::steady_clock::now() < wall_end) {
      for (int i = 0; i < 64; ++i) {
        int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) close(fd);
      }
      iterations += 64;
    }
  } else if (mode == "cgroup") {
    if (dir.empty()) {
      std::fprintf(stderr, "cgroup needs --dir\n");
      return 2;
    }
    const std::string path = dir + "/kpath-loop-" + std::to_string(getpid());
    while (std::chrono::steady_clock::now() < wall_end) {
      if (mkdir(path.c_str(), 0755) != 0 || rmdir(path.c_str()) != 0) {
        std::perror(path.c_str());
        rmdir(path.c_str());
        return 1;
      }
      ++iterations;
    }
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  const double cpu_seconds = ThreadCpuSeconds() - cpu_start;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::printf("%.0f %.0f\n", static_cast<double>(iterations) / cpu_seconds,
              static_cast<double>(iterations) / wall);
  return 0;
}
