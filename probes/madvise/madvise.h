/* Types shared between the madvise BPF programs and the user-space probe. Fixed-width types only.
 */
#ifndef KPATH_MADVISE_H
#define KPATH_MADVISE_H

/* The advice categories of the metrics contract (label `advice`). The BPF programs map the
 * madvise(2) `behavior` argument onto them (asm-generic uapi numbers, which x86_64 and arm64
 * use), so that a process passing random numbers cannot make the keys unbounded. */
enum madvise_advice {
  MADVISE_ADVICE_DONTNEED = 0, /* MADV_DONTNEED 4 */
  MADVISE_ADVICE_FREE,         /* MADV_FREE 8 */
  MADVISE_ADVICE_WILLNEED,     /* MADV_WILLNEED 3 */
  MADVISE_ADVICE_COLD,         /* MADV_COLD 20 */
  MADVISE_ADVICE_PAGEOUT,      /* MADV_PAGEOUT 21 */
  MADVISE_ADVICE_HUGEPAGE,     /* MADV_HUGEPAGE 14 */
  MADVISE_ADVICE_NOHUGEPAGE,   /* MADV_NOHUGEPAGE 15 */
  MADVISE_ADVICE_COLLAPSE,     /* MADV_COLLAPSE 25 */
  MADVISE_ADVICE_OTHER,        /* every other number */
  MADVISE_ADVICE_COUNT,
};

/* Keyed counters (KPATH_KEYED_COUNTERS madvise_counts): calls and bytes by process and advice.
 * A key whose comm is all zero is one of the reserved overflow keys: user space inserts one per
 * advice into each buffer, and a call that finds the hash full is counted there, so a storm of
 * process names folds into comm "other" without losing its advice. */
struct madvise_key {
  char comm[16];
  __u32 advice;   /* enum madvise_advice */
  __u32 reserved; /* 0 */
  /* Whose process it is when pods are labelled (tunable madvise_owner, enum kpath_owner_kind): the
   * task's cgroup v2 id or its process id; 0 otherwise, and in the reserved overflow keys. */
  __u64 owner;
};

struct madvise_value {
  __u64 calls;
  __u64 bytes; /* the length argument, summed; process_madvise: its iovec lengths */
};

/* Per-CPU event counters (array map `madvise_events`). */
enum madvise_event {
  MADVISE_EVENT_IOVEC_READ_ERROR = 0, /* process_madvise iovec unreadable: call counted, bytes
                                         partial */
  MADVISE_EVENT_SELF_CHECK,           /* kpathd's own check call, seen (not counted as a call) */
  MADVISE_EVENT_MAX,
};

/* kpathd checks that the hook it attached sees madvise(2) with a call of its own: this length,
 * MADV_NORMAL (0), from its process (MadviseProbe::CheckHookSeesCalls). A function can be in
 * kallsyms and BTF, and attach, and still not be on the system call's path: GCC inlines
 * do_madvise into the syscall on some kernels (Debian 11's 5.10) and keeps a copy for its other
 * callers. An odd length, so that no real call of kpathd's could look like it. */
#define MADVISE_SELF_CHECK_BYTES 4661

/* process_madvise accepts at most UIO_MAXIOV iovecs (more is EINVAL): the byte-summing loop is
 * bounded by it. */
#define MADVISE_MAX_IOVECS 1024

/* How a kprobe finds the arguments (const volatile kprobe_layout). */
enum madvise_kprobe_layout {
  MADVISE_KPROBE_SYSCALL_REGS = 0, /* syscall wrapper: arg 1 points at the user pt_regs */
  MADVISE_KPROBE_PLAIN_ARGS,       /* (start, len, behavior) in the calling convention */
  MADVISE_KPROBE_MM_FIRST,         /* do_madvise(mm, start, len, behavior) */
};

#endif
