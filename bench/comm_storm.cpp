// kpath-bench-comm-storm: many short-lived processes, each with its own name (comm), each doing
// what kpathd labels by process: madvise(MADV_DONTNEED) calls, and creating and removing a memory
// cgroup (percpu allocations and a cgroup mkdir/rmdir pair). Drives kpathd's comm label to as
// many distinct values as there are processes, to measure /metrics at 10x and 100x the series.
//
//   kpath-bench-comm-storm --names N [--prefix P] [--first I] [--madvise-calls K]
//                          [--cgroup-dir DIR] [--rate R] [--parallel J]
//
// Process i (from I to I+N-1) is named "<P><i>" (at most 15 bytes), makes K madvise calls and,
// with --cgroup-dir, mkdir+rmdir DIR/n<i>. At most J run at once, started at R per second at
// most (0: as fast as they finish; kpathd's BPF hashes hold a bounded number of keys per
// sampling interval). Prints "names=<n> failed=<n> seconds=<s>".
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

double Now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

[[noreturn]] void Child(const std::string& name, int madvise_calls, const std::string& cgroup) {
  prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);
  char* page = static_cast<char*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (page == MAP_FAILED) _exit(1);
  for (int i = 0; i < madvise_calls; ++i) {
    *reinterpret_cast<volatile char*>(page) = 1;
    madvise(page, 4096, MADV_DONTNEED);
  }
  if (!cgroup.empty()) {
    if (mkdir(cgroup.c_str(), 0755) != 0) _exit(1);
    if (rmdir(cgroup.c_str()) != 0) _exit(1);
  }
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  int names = 100, first = 0, madvise_calls = 10, parallel = 2;
  double rate = 0;
  std::string prefix = "kb-", cgroup_dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--names" && i + 1 < argc) {
      names = std::atoi(argv[++i]);
    } else if (a == "--first" && i + 1 < argc) {
      first = std::atoi(argv[++i]);
    } else if (a == "--prefix" && i + 1 < argc) {
      prefix = argv[++i];
    } else if (a == "--madvise-calls" && i + 1 < argc) {
      madvise_calls = std::atoi(argv[++i]);
    } else if (a == "--cgroup-dir" && i + 1 < argc) {
      cgroup_dir = argv[++i];
    } else if (a == "--rate" && i + 1 < argc) {
      rate = std::atof(argv[++i]);
    } else if (a == "--parallel" && i + 1 < argc) {
      parallel = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: %s --names N [--prefix P] [--first I] [--madvise-calls K] "
                   "[--cgroup-dir DIR] [--rate R] [--parallel J]\n",
                   argv[0]);
      return 2;
    }
  }
  const double start = Now();
  int running = 0, failed = 0;
  auto reap = [&](int options) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, options);
    if (pid <= 0) return false;
    --running;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    return true;
  };
  for (int k = 0; k < names; ++k) {
    if (rate > 0) {
      const double due = start + k / rate;
      while (Now() < due) usleep(static_cast<useconds_t>((due - Now()) * 1e6) + 1);
    }
    while (running >= parallel) reap(0);
    const int i = first + k;
    std::string name = (prefix + std::to_string(i)).substr(0, 15);
    std::string cgroup = cgroup_dir.empty() ? "" : cgroup_dir + "/n" + std::to_string(i);
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      ++failed;
      continue;
    }
    if (pid == 0) Child(name, madvise_calls, cgroup);
    ++running;
  }
  while (running > 0 && reap(0)) {
  }
  std::printf("names=%d failed=%d seconds=%.3f\n", names, failed, Now() - start);
  return failed == 0 ? 0 : 1;
}
