/* The layout of the percpu probe's allocation log, shared by its BPF side (allocation_log.bpf.h)
 * and user space (allocation_log_reader.cpp). Fixed-width types only.
 *
 * Each CPU appends its allocations (pointer, caller, bytes) and its frees (pointer) to two logs
 * of its own, each record where the CPU's last one ended, and user space matches frees to
 * allocations: no shared table line on the event path (bench/README.md, "Not a cross-CPU line:
 * the working set"). Records carry an order stamp so that user space can tell, for one pointer,
 * whether an allocation on one CPU came before or after a free on another:
 *  - a free takes `plog_order`'s value and adds one (an atomic add: the free tracepoint runs
 *    under pcpu_lock, so frees are serialised anyway);
 *  - an allocation reads it. The area an allocation gets was claimed under pcpu_lock after any
 *    earlier free of it released that lock, and the allocation's tracepoint runs after that: it
 *    reads a value above the stamp of the free before it, and at most the stamp of its own free.
 * So, for one pointer, an allocation stamped a comes before a free stamped f exactly when
 * a <= f, and a free matches the live allocation of its pointer with the largest a <= f.
 *
 * A log is a ring of 2^log_records_bits records per CPU in an mmap-able array (CPU c's records
 * from index c << bits). The CPU's `plog_heads` entry counts the records it wrote (stored after
 * the record); user space stores in `plog_tails` how many it has read. A CPU whose log holds
 * a full ring not yet read puts the record into the hash map `plog_spill` instead; if that is
 * full too, the record is counted as lost (PERCPU_EVENT_LOG_FULL). Only the CPU writes its
 * records: a program does not run nested in itself (the kernel skips a program that would), and
 * allocations and frees have logs of their own. */
#ifndef KPATH_PERCPU_ALLOCATION_LOG_H
#define KPATH_PERCPU_ALLOCATION_LOG_H

/* An allocation: the percpu pointer, the caller word (percpu.h), and (order stamp mod 2^32) << 32
 * | bytes over all CPUs (at most 32 KiB per CPU: fits 32 bits). */
struct percpu_log_alloc {
  __u64 ptr;
  __u64 caller;
  __u64 stamp_bytes;
};

/* A free: the pointer and its order stamp. */
struct percpu_log_free {
  __u64 ptr;
  __u64 stamp;
};

/* Records written (plog_heads, by the CPU) or read (plog_tails, by user space), per CPU; one
 * cache line each, so that a CPU's writes do not take another CPU's line. */
struct percpu_log_cursor {
  __u64 allocs;
  __u64 frees;
  __u64 spilled; /* plog_heads: records this CPU put into plog_spill */
  __u64 pad[5];
};

/* plog_spill: records that found their CPU's log full. A free's stamp is unique; allocations
 * between two frees share theirs but never a pointer (the same pointer twice needs a free in
 * between). */
#define PERCPU_LOG_SPILL_FREE (1ULL << 63) /* in `stamp`: the record is a free */
struct percpu_log_spill_key {
  __u64 ptr;
  __u64 stamp; /* the full order stamp, | PERCPU_LOG_SPILL_FREE for a free */
};
struct percpu_log_spill_value {
  __u64 caller; /* allocations only */
  __u64 bytes;
};

#endif
