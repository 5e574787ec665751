#include "irqoff_fixture.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "irqoff_fixture.skel.h"

namespace kpath::testing {

std::unique_ptr<IrqOffFixture> IrqOffFixture::Load(std::string* why, bool preemptible) {
  // Ask the kernel's BTF for the kfuncs rather than failing in the verifier.
  struct btf* vmlinux = btf__load_vmlinux_btf();
  if (vmlinux == nullptr) {
    *why = "no vmlinux BTF (the fixture's kfuncs need it)";
    return nullptr;
  }
  for (const char* kfunc : {"bpf_local_irq_save", "bpf_local_irq_restore", "bpf_iter_num_new"}) {
    if (btf__find_by_name_kind(vmlinux, kfunc, BTF_KIND_FUNC) <= 0) {
      *why = std::string("kernel lacks the kfunc ") + kfunc + " (Linux 6.14+)";
      btf__free(vmlinux);
      return nullptr;
    }
  }
  btf__free(vmlinux);
  irqoff_fixture_bpf* skel = irqoff_fixture_bpf__open();
  if (skel == nullptr) {
    *why = std::string("opening the fixture: ") + std::strerror(errno);
    return nullptr;
  }
  bpf_program__set_autoload(skel->progs.hold_irqs_off, !preemptible);
  bpf_program__set_autoload(skel->progs.hold_irqs_off_preemptible, preemptible);
  if (int err = irqoff_fixture_bpf__load(skel); err != 0) {
    *why = std::string("loading the fixture: ") + std::strerror(-err);
    irqoff_fixture_bpf__destroy(skel);
    return nullptr;
  }
  // The tracepoint program attaches through tracefs: mount it for the attach where nothing has
  // (a host without systemd), and take it away again: the attached event outlives the mount.
  bool mounted = false;
  if (!preemptible && !std::filesystem::exists("/sys/kernel/tracing/events/syscalls")) {
    mounted = mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0;
  }
  int attach_err = preemptible ? 0 : irqoff_fixture_bpf__attach(skel);
  if (mounted) umount2("/sys/kernel/tracing", MNT_DETACH);
  if (int err = attach_err; err != 0) {
    *why = std::string("attaching the fixture: ") + std::strerror(-err);
    irqoff_fixture_bpf__destroy(skel);
    return nullptr;
  }
  return std::unique_ptr<IrqOffFixture>(new IrqOffFixture(skel, preemptible));
}

IrqOffFixture::~IrqOffFixture() { irqoff_fixture_bpf__destroy(skel_); }

void PinAndNameThisThread(int cpu, const std::string& name) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
  prctl(PR_SET_NAME, name.c_str());
}

std::vector<std::chrono::nanoseconds> IrqOffFixture::HoldIrqsOff(int cpu,
                                                                 std::chrono::milliseconds hold,
                                                                 int count,
                                                                 std::chrono::milliseconds gap,
                                                                 const std::string& thread_name) {
  std::vector<std::chrono::nanoseconds> lengths;
  std::thread worker([&] {
    PinAndNameThisThread(cpu, thread_name);
    last_thread_ = gettid();
    skel_->bss->hold_ns = static_cast<__u64>(std::chrono::nanoseconds(hold).count());
    skel_->bss->target_tgid = static_cast<__u32>(getpid());
    for (int i = 0; i < count; ++i) {
      __u64 before = skel_->bss->regions;
      if (preemptible_) {
        LIBBPF_OPTS(bpf_test_run_opts, opts);
        bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.hold_irqs_off_preemptible), &opts);
      } else {
        getpgid(0);
      }
      if (skel_->bss->regions != before) {
        lengths.emplace_back(static_cast<int64_t>(skel_->bss->last_region_ns));
      }
      // Busy, not asleep: the thread keeps the CPU, as a process holding IRQs off would.
      auto until = std::chrono::steady_clock::now() + gap;
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    skel_->bss->target_tgid = 0;
  });
  worker.join();
  return lengths;
}

IrqOffFixture::Together IrqOffFixture::HoldIrqsOffTogether(const std::vector<int>& cpus,
                                                           std::chrono::milliseconds hold,
                                                           int count, std::chrono::milliseconds gap,
                                                           const std::string& thread_name) {
  skel_->bss->hold_ns = static_cast<__u64>(std::chrono::nanoseconds(hold).count());
  const __u64 regions_before = skel_->bss->regions;
  std::barrier ready(static_cast<std::ptrdiff_t>(cpus.size()));
  std::atomic<int64_t> start_at{0};
  // Each thread's hold, per round: the system call's [entry, return) as user space saw it.
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<std::pair<Clock::time_point, Clock::time_point>>> calls(
      cpus.size(), std::vector<std::pair<Clock::time_point, Clock::time_point>>(count));
  std::vector<std::thread> workers;
  skel_->bss->target_tgid = static_cast<__u32>(getpid());
  for (size_t t = 0; t < cpus.size(); ++t) {
    workers.emplace_back([&, t] {
      PinAndNameThisThread(cpus[t], thread_name);
      // Real-time, so that a busy host's other threads do not preempt one between the common
      // start and its hold (which then holds alone): the holds stay together under load.
      sched_param realtime{};
      realtime.sched_priority = 1;
      pthread_setschedparam(pthread_self(), SCHED_FIFO, &realtime);
      for (int i = 0; i < count; ++i) {
        // The first thread sets a common start 2 ms ahead; every thread spins until then.
        if (t == 0) {
          start_at = (std::chrono::steady_clock::now() + std::chrono::milliseconds(2))
                         .time_since_epoch()
                         .count();
        }
        ready.arrive_and_wait();
        const std::chrono::steady_clock::time_point start{
            std::chrono::steady_clock::duration(start_at.load())};
        while (std::chrono::steady_clock::now() < start) {
        }
        calls[t][i].first = Clock::now();
        getpgid(0);
        calls[t][i].second = Clock::now();
        auto until = std::chrono::steady_clock::now() + gap;
        while (std::chrono::steady_clock::now() < until) {
        }
        ready.arrive_and_wait();
      }
    });
  }
  for (std::thread& w : workers) w.join();
  skel_->bss->target_tgid = 0;
  Together result;
  result.regions = static_cast<int>(skel_->bss->regions - regions_before);
  // A round was together when no thread was preempted in its call before its hold (the call
  // lasted the hold and at most a millisecond more) and the calls began within a millisecond
  // of each other: the holds then began and ended together too.
  for (int i = 0; i < count; ++i) {
    bool together = true;
    Clock::time_point first_entry = calls[0][i].first, last_entry = calls[0][i].first;
    for (size_t t = 0; t < cpus.size(); ++t) {
      first_entry = std::min(first_entry, calls[t][i].first);
      last_entry = std::max(last_entry, calls[t][i].first);
      together =
          together && calls[t][i].second - calls[t][i].first <= hold + std::chrono::milliseconds(1);
    }
    if (together && last_entry - first_entry <= std::chrono::milliseconds(1))
      ++result.rounds_together;
  }
  return result;
}

}  // namespace kpath::testing
