// kpath-bench-event-load: a steady stream of the events kpathd counts, at a fixed rate, for a
// fixed time: madvise(MADV_DONTNEED) calls on a page written just before (seed 003's pattern;
// every call also flushes the TLB), and memory cgroups created and removed (seed 000's churn:
// each one makes percpu allocations and a cgroup mkdir/rmdir pair).
//
//   kpath-bench-event-load --seconds S [--madvise-rate N] [--cgroup-dir DIR --cgroup-rate M]
//                          [--comm NAME]
//
// Pacing is by absolute 1 ms ticks (calls behind schedule are made up, at most one second's
// worth), so the rate holds whatever else runs. The cgroups are DIR/load-<i>, each removed at
// once; DIR must exist. Prints "madvise_calls=<n> cgroups=<n> seconds=<s>".
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

double Now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void SleepUntil(double t) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t);
  ts.tv_nsec = static_cast<long>((t - static_cast<double>(ts.tv_sec)) * 1e9);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// Calls `step` so that it has run rate * elapsed times, checked every millisecond, until `end`.
template <typename Step>
long Paced(double rate, double end, Step step) {
  const double start = Now();
  long done = 0;
  for (double tick = start; tick < end; tick += 0.001) {
    SleepUntil(tick);
    const double now = Now();
    long due = static_cast<long>((now - start) * rate);
    if (due - done > static_cast<long>(rate)) done = due - static_cast<long>(rate);
    for (; done < due; ++done) {
      if (!step(done)) return done;
    }
  }
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10, madvise_rate = 0, cgroup_rate = 0;
  std::string cgroup_dir, comm = "kpath-bench-ld";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--madvise-rate" && i + 1 < argc) {
      madvise_rate = std::atof(argv[++i]);
    } else if (a == "--cgroup-rate" && i + 1 < argc) {
      cgroup_rate = std::atof(argv[++i]);
    } else if (a == "--cgroup-dir" && i + 1 < argc) {
      cgroup_dir = argv[++i];
    } else if (a == "--comm" && i + 1 < argc) {
      comm = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s --seconds S [--madvise-rate N] [--cgroup-dir DIR --cgroup-rate M] "
                   "[--comm NAME]\n",
                   argv[0]);
      return 2;
    }
  }
  if (cgroup_rate > 0 && cgroup_dir.empty()) {
    std::fprintf(stderr, "%s: --cgroup-rate needs --cgroup-dir\n", argv[0]);
    return 2;
  }
  prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
  char* page = static_cast<char*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (page == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  const double start = Now(), end = start + seconds;
  std::atomic<long> cgroups{0};
  std::atomic<bool> cgroup_failed{false};
  std::thread churn([&] {
    if (cgroup_rate <= 0) return;
    prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
    cgroups = Paced(cgroup_rate, end, [&](long i) {
      std::string dir = cgroup_dir + "/load-" + std::to_string(i);
      if (mkdir(dir.c_str(), 0755) != 0 || rmdir(dir.c_str()) != 0) {
        std::fprintf(stderr, "kpath-bench-event-load: %s: %s\n", dir.c_str(), std::strerror(errno));
        rmdir(dir.c_str());
        cgroup_failed = true;
        return false;
      }
      return true;
    });
  });
  long calls = 0;
  if (madvise_rate > 0) {
    calls = Paced(madvise_rate, end, [&](long) {
      *reinterpret_cast<volatile char*>(page) = 1;
      madvise(page, 4096, MADV_DONTNEED);
      return true;
    });
  } else {
    SleepUntil(end);
  }
  churn.join();
  std::printf("madvise_calls=%ld cgroups=%ld seconds=%.3f\n", calls, cgroups.load(), Now() - start);
  return cgroup_failed ? 1 : 0;
}
