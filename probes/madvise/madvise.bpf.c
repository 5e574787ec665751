// SPDX-License-Identifier: GPL-2.0
/* madvise and process_madvise calls by process and advice, through classic tracepoints or
 * kprobes. This object has no CO-RE relocation, so it loads on kernels without BTF (4.19); the
 * fentry programs, which need BTF anyway, are in madvise_fentry.bpf.c. User space enables exactly
 * one madvise program (and at most one process_madvise program) after asking the kernel. */

#include "kpath_bpf.h"
#include "madvise_counting.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
KPATH_TUNABLE(__u32, tp_len_offset, 0); /* sys_enter_madvise, from its format file */
KPATH_TUNABLE(__u32, tp_len_size, 0);
KPATH_TUNABLE(__u32, tp_behavior_offset, 0);
KPATH_TUNABLE(__u32, tp_behavior_size, 0);
KPATH_TUNABLE(__u32, tp_vec_offset, 0); /* sys_enter_process_madvise */
KPATH_TUNABLE(__u32, tp_vec_size, 0);
KPATH_TUNABLE(__u32, tp_vlen_offset, 0);
KPATH_TUNABLE(__u32, tp_vlen_size, 0);
KPATH_TUNABLE(__u32, tp_pm_behavior_offset, 0);
KPATH_TUNABLE(__u32, tp_pm_behavior_size, 0);
KPATH_TUNABLE(__u32, kprobe_layout, MADVISE_KPROBE_SYSCALL_REGS);    /* madvise_kprobe */
KPATH_TUNABLE(__u32, pm_kprobe_layout, MADVISE_KPROBE_SYSCALL_REGS); /* process_madvise_kprobe */
KPATH_TUNABLE(__u32, task_comm_offset, 0); /* task_struct.comm, from vmlinux BTF */

/* The record of every syscalls:sys_enter_* event (struct syscall_trace_enter in
 * kernel/trace/trace_syscalls.c): the common header, the syscall number, then each argument in
 * an unsigned long. User space uses the programs that read it directly only after checking the
 * format file's offsets against it; otherwise the *_offsets programs read at those offsets. */
struct syscall_enter_record {
  __u64 common;
  __s64 nr;
  __u64 args[6];
};

SEC("tp/syscalls/sys_enter_madvise")
int madvise_tracepoint(struct syscall_enter_record* ctx) {
  /* madvise(start, len_in, behavior) */
  madvise_count(ctx->args[2], ctx->args[1]);
  return 0;
}

/* The same, reading the comm straight from the task (bpf_get_current_task_btf, Linux 5.11+, at
 * the offset vmlinux BTF gives): two loads instead of bpf_get_current_comm's string copy, which
 * is a third of this program's cost. Only the verifier needs BTF for it; the object still has no
 * CO-RE relocation. */
SEC("tp/syscalls/sys_enter_madvise")
int madvise_tracepoint_task_comm(struct syscall_enter_record* ctx) {
  const char* task = (const char*)bpf_get_current_task_btf();
  const __u64* comm = (const __u64*)(task + task_comm_offset);
  struct madvise_key key;
  __u64 words[2] = {comm[0], comm[1]};
  __builtin_memcpy(key.comm, words, sizeof(key.comm));
  madvise_count_key(&key, ctx->args[2], ctx->args[1]);
  return 0;
}

SEC("tp/syscalls/sys_enter_madvise")
int madvise_tracepoint_offsets(void* ctx) {
  madvise_count(kpath_tp_field(ctx, tp_behavior_offset, tp_behavior_size),
                kpath_tp_field(ctx, tp_len_offset, tp_len_size));
  return 0;
}

SEC("tp/syscalls/sys_enter_process_madvise")
int process_madvise_tracepoint(void* ctx) {
  /* process_madvise(pidfd, vec, vlen, behavior, flags) */
  process_madvise_count(kpath_tp_field(ctx, tp_vec_offset, tp_vec_size),
                        kpath_tp_field(ctx, tp_vlen_offset, tp_vlen_size),
                        kpath_tp_field(ctx, tp_pm_behavior_offset, tp_pm_behavior_size));
  return 0;
}

/* A kprobe's context is struct pt_regs, which is ABI for BPF kprobe programs
 * (bpf_user_pt_regs_t). It is declared here rather than taken from vmlinux.h so that reading it
 * needs no CO-RE relocation, hence no BTF. */
#if defined(__TARGET_ARCH_x86)
struct madvise_regs {
  __u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags,
      sp, ss;
};
/* Function arguments (System V calling convention) and syscall arguments (the syscall ABI puts
 * the fourth in r10, not cx). */
#define MADVISE_CALL_ARG(r, n) \
  ((n) == 0 ? (r)->di : (n) == 1 ? (r)->si : (n) == 2 ? (r)->dx : (r)->cx)
#define MADVISE_SYSCALL_ARG_PTR(r, n) \
  ((n) == 0 ? &(r)->di : (n) == 1 ? &(r)->si : (n) == 2 ? &(r)->dx : &(r)->r10)
#elif defined(__TARGET_ARCH_arm64)
struct madvise_regs {
  __u64 regs[31];
  __u64 sp, pc, pstate;
};
#define MADVISE_CALL_ARG(r, n) ((r)->regs[n])
#define MADVISE_SYSCALL_ARG_PTR(r, n) (&(r)->regs[n])
#else
#error "madvise kprobes: unsupported architecture"
#endif

/* An argument of the syscall whose user registers `user` points at (the syscall wrappers'
 * argument): kernel memory, read with a helper. */
static __always_inline __u64 syscall_arg(const struct madvise_regs* user, int n) {
  __u64 v = 0;
  bpf_probe_read_kernel(&v, sizeof(v), MADVISE_SYSCALL_ARG_PTR(user, n));
  return v;
}

SEC("kprobe")
int madvise_kprobe(struct madvise_regs* ctx) {
  if (kprobe_layout == MADVISE_KPROBE_SYSCALL_REGS) {
    const struct madvise_regs* user = (const struct madvise_regs*)MADVISE_CALL_ARG(ctx, 0);
    madvise_count(syscall_arg(user, 2), syscall_arg(user, 1));
  } else if (kprobe_layout == MADVISE_KPROBE_MM_FIRST) {
    madvise_count(MADVISE_CALL_ARG(ctx, 3), MADVISE_CALL_ARG(ctx, 2));
  } else {
    madvise_count(MADVISE_CALL_ARG(ctx, 2), MADVISE_CALL_ARG(ctx, 1));
  }
  return 0;
}

SEC("kprobe")
int process_madvise_kprobe(struct madvise_regs* ctx) {
  if (pm_kprobe_layout == MADVISE_KPROBE_SYSCALL_REGS) {
    const struct madvise_regs* user = (const struct madvise_regs*)MADVISE_CALL_ARG(ctx, 0);
    process_madvise_count(syscall_arg(user, 1), syscall_arg(user, 2), syscall_arg(user, 3));
  } else {
    process_madvise_count(MADVISE_CALL_ARG(ctx, 1), MADVISE_CALL_ARG(ctx, 2),
                          MADVISE_CALL_ARG(ctx, 3));
  }
  return 0;
}
