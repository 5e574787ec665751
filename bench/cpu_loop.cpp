// The workloads of bench/irqoff_overhead.py: a CPU-bound loop (what the IRQ-off detector's timer
// interrupts slow down) and an open/close loop (what the slabinfo-reader tracepoint on every
// openat slows down). Pinned to one CPU; prints iterations per second of the thread's own CPU
// time, then per wall-clock second.
//
//   kpath-bench-cpu-loop spin|openclose [--seconds S] [--cpu N]
#include <fcntl.h>
#include <sched.h>
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
    std::fprintf(stderr, "usage: %s spin|openclose [--seconds S] [--cpu N]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  double seconds = 1.0;
  int cpu = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--cpu") == 0) cpu = std::atoi(argv[i + 1]);
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
