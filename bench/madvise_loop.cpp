// kpath-bench-madvise-loop: a tight single-thread madvise(MADV_DONTNEED) loop on one 4 KiB page,
// as a Go runtime returning memory after each GC does. Prints the calls per second of the
// thread's own CPU time, and of wall-clock time: on a shared machine other work preempts the
// loop, which lowers the wall-clock rate but not the CPU-time one (the cost of a call, tracer
// included, is all in the calling thread's system time).
//
//   kpath-bench-madvise-loop [--seconds S] [--cpu N] [--no-touch] [--comm NAME]
//
// By default every call is preceded by a write to the page, so that each call really unmaps a
// page (the seed-003 pattern, about 4 us per call here); --no-touch calls madvise on a page that
// is never mapped, which measures the bare system call (the worst case for any tracer's share).
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  double seconds = 1.0;
  int cpu = -1;
  bool touch = true;
  std::string comm = "kpath-bench-mad";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--cpu" && i + 1 < argc) {
      cpu = std::atoi(argv[++i]);
    } else if (a == "--no-touch") {
      touch = false;
    } else if (a == "--comm" && i + 1 < argc) {
      comm = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--cpu N] [--no-touch] [--comm NAME]\n",
                   argv[0]);
      return 2;
    }
  }
  prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::perror("sched_setaffinity");
      return 1;
    }
  }
  char* page = static_cast<char*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (page == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  using Clock = std::chrono::steady_clock;
  auto thread_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  };
  const double cpu_start = thread_seconds();
  const Clock::time_point start = Clock::now();
  const Clock::duration budget =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  long calls = 0;
  Clock::time_point now = start;
  // Check the clock every 256 calls: cheap next to the calls, fine-grained enough to stop on time.
  while (now - start < budget) {
    for (int i = 0; i < 256; ++i) {
      if (touch) *reinterpret_cast<volatile char*>(page) = 1;
      madvise(page, 4096, MADV_DONTNEED);
    }
    calls += 256;
    now = Clock::now();
  }
  const double cpu_seconds = thread_seconds() - cpu_start;
  const double wall = std::chrono::duration<double>(now - start).count();
  // "<calls per CPU-second> <calls per wall-clock second>"
  std::printf("%.0f %.0f\n", static_cast<double>(calls) / cpu_seconds,
              static_cast<double>(calls) / wall);
  return 0;
}
