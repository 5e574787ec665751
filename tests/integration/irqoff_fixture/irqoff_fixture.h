// Test support: real IRQ-disabled regions of a chosen length, made by irqoff_fixture.bpf.c on
// the CPU of a thread of the test process. Everything it loads is gone when it is destroyed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

struct irqoff_fixture_bpf;

namespace kpath::testing {

// Pins the calling thread to `cpu` and names it `name` (its comm): what the IRQ-off fixtures'
// writer threads do first, so that regions are looked for on that CPU under that name.
void PinAndNameThisThread(int cpu, const std::string& name);

class IrqOffFixture {
 public:
  // Loads and attaches the fixture; nullptr and `why` when the kernel lacks what it needs (the
  // kfuncs bpf_local_irq_save/restore and bpf_iter_num_*, Linux 6.14+). `preemptible`: the
  // regions are made with the preempt count at 0 (hold_irqs_off_preemptible in the .bpf.c), as
  // other CPUs see a vCPU that the hypervisor stalls in user code.
  static std::unique_ptr<IrqOffFixture> Load(std::string* why, bool preemptible = false);
  ~IrqOffFixture();
  IrqOffFixture(const IrqOffFixture&) = delete;
  IrqOffFixture& operator=(const IrqOffFixture&) = delete;

  // From a new thread named `thread_name` pinned to `cpu`: `count` times, holds IRQs off for
  // `hold`, then keeps running user code for `gap` (so that the delayed timer lands in it).
  // Returns each region's length as the fixture measured it inside the kernel.
  std::vector<std::chrono::nanoseconds> HoldIrqsOff(int cpu, std::chrono::milliseconds hold,
                                                    int count, std::chrono::milliseconds gap,
                                                    const std::string& thread_name);
  // The thread id of the last HoldIrqsOff's thread (the pid an event of its regions names).
  pid_t last_thread() const { return last_thread_; }
  // The same on several CPUs at once: a thread per CPU, all named `thread_name`, that start
  // each hold together (within microseconds: a barrier, then a spin until a common instant),
  // as a lock convoy over those CPUs would, or a hypervisor pausing the whole VM looks. Returns
  // how many regions were made in all, and in how many of the `count` rounds every CPU's hold
  // really overlapped all the others' for most of `hold` (on a busy host a thread may be
  // preempted between the common start and its hold, and then holds alone).
  struct Together {
    int regions = 0;
    int rounds_together = 0;
  };
  Together HoldIrqsOffTogether(const std::vector<int>& cpus, std::chrono::milliseconds hold,
                               int count, std::chrono::milliseconds gap,
                               const std::string& thread_name);

 private:
  IrqOffFixture(irqoff_fixture_bpf* skel, bool preemptible)
      : skel_(skel), preemptible_(preemptible) {}
  irqoff_fixture_bpf* skel_;
  bool preemptible_;
  pid_t last_thread_ = 0;
};

}  // namespace kpath::testing
