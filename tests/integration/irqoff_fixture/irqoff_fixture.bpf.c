// SPDX-License-Identifier: GPL-2.0
/* Test fixture, not part of kpathd: a real IRQ-disabled region of a chosen length on the CPU of
 * the test thread. When the target process calls getpgid(2), this program disables IRQs on its
 * CPU (kfunc bpf_local_irq_save, Linux 6.14+), spins on bpf_ktime_get_ns() until `hold_ns` have
 * passed, and restores them; the timer interrupt that was due meanwhile fires right at the
 * restore, as it would after a driver's spin_unlock_irqrestore. The tracepoint runs it with
 * preemption off, as kernel code that holds a lock with IRQs off is.
 *
 * hold_irqs_off_preemptible does the same from a BPF_PROG_TYPE_SYSCALL program (run by
 * BPF_PROG_TEST_RUN in the caller's context), where the preempt count stays 0: to other CPUs the
 * CPU looks preemptible, as a vCPU that the hypervisor stalls in user code does, while its
 * timer is held back. The detector's witnesses must take it for such a stall. */
/* vmlinux.h first: libbpf's headers use its types. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
// clang-format on

char LICENSE[] SEC("license") = "GPL";

#if defined(__TARGET_ARCH_arm64)
/* The vendored arm64 vmlinux.h is Debian 12's 6.1, older than open-coded iterators (6.4): the
 * iterator's type as include/uapi/linux/bpf.h declares it. (The kfuncs themselves need 6.14+.) */
struct bpf_iter_num {
  __u64 __opaque[1];
} __attribute__((aligned(8)));
#endif

extern void bpf_local_irq_save(unsigned long* flags) __ksym;
extern void bpf_local_irq_restore(unsigned long* flags) __ksym;
extern int bpf_iter_num_new(struct bpf_iter_num* it, int start, int end) __ksym;
extern int* bpf_iter_num_next(struct bpf_iter_num* it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num* it) __ksym;

/* Written by the test through the skeleton's mmapped .bss. */
__u32 target_tgid = 0;
__u64 hold_ns = 0;
/* Read back by the test: how many regions it made and how long the last one really was. */
__u64 regions = 0;
__u64 last_region_ns = 0;

/* The kernel caps an open-coded numeric iterator at 8M steps; each step spins and reads the
 * clock (microseconds), so one region can last far longer than any test needs. */
#define FIXTURE_MAX_STEPS (8 * 1024 * 1024)
/* Steps between two clock reads (a few microseconds). */
#define FIXTURE_SPIN_STEPS 1000

static __always_inline void hold(void) {
  unsigned long flags;
  struct bpf_iter_num it;
  __u64 start = bpf_ktime_get_ns();
  __u64 until = start + hold_ns;
  __u64 end = start;

  bpf_local_irq_save(&flags);
  bpf_iter_num_new(&it, 0, FIXTURE_MAX_STEPS);
  while (bpf_iter_num_next(&it)) {
    /* Most of the time away from the clock: reading kvm-clock disables preemption for the
     * read, and a witness that looks then sees the CPU holding a preemption level. */
    struct bpf_iter_num spin;
    bpf_iter_num_new(&spin, 0, FIXTURE_SPIN_STEPS);
    while (bpf_iter_num_next(&spin)) {
    }
    bpf_iter_num_destroy(&spin);
    end = bpf_ktime_get_ns();
    if (end >= until) break;
  }
  bpf_iter_num_destroy(&it);
  bpf_local_irq_restore(&flags);

  last_region_ns = end - start;
  __sync_fetch_and_add(&regions, 1);
}

SEC("tp/syscalls/sys_enter_getpgid")
int hold_irqs_off(void* ctx) {
  if (target_tgid == 0 || (bpf_get_current_pid_tgid() >> 32) != target_tgid) return 0;
  hold();
  return 0;
}

SEC("syscall")
int hold_irqs_off_preemptible(void* ctx) {
  hold();
  return 0;
}
