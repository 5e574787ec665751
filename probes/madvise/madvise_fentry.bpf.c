// SPDX-License-Identifier: GPL-2.0
/* madvise and process_madvise calls by process and advice, through fentry (BPF trampolines):
 * the cheapest hook, and unlike syscall tracepoints it leaves the fast syscall path of every
 * other system call alone. Needs BTF, so CO-RE is fine here. User space sets the attach target
 * and enables exactly one madvise program (and at most one process_madvise program). */
#include "kpath_bpf.h"
#include "madvise_counting.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* The syscall wrappers (__x64_sys_madvise, __arm64_sys_madvise) take the user registers. */
SEC("fentry")
int BPF_PROG(madvise_fentry_syscall, struct pt_regs* regs) {
  madvise_count(PT_REGS_PARM3_SYSCALL(regs), PT_REGS_PARM2_SYSCALL(regs));
  return 0;
}

/* do_madvise(mm, start, len_in, behavior): since process_madvise came (Linux 5.10). */
SEC("fentry")
int BPF_PROG(madvise_fentry_do_madvise_mm, void* mm, unsigned long start, size_t len_in,
             int behavior) {
  madvise_count((__u64)behavior, len_in);
  return 0;
}

/* do_madvise(start, len_in, behavior): its first form (Linux 5.6, for io_uring). */
SEC("fentry")
int BPF_PROG(madvise_fentry_do_madvise, unsigned long start, size_t len_in, int behavior) {
  madvise_count((__u64)behavior, len_in);
  return 0;
}

SEC("fentry")
int BPF_PROG(process_madvise_fentry_syscall, struct pt_regs* regs) {
  process_madvise_count(PT_REGS_PARM2_SYSCALL(regs), PT_REGS_PARM3_SYSCALL(regs),
                        PT_REGS_PARM4_SYSCALL(regs));
  return 0;
}
