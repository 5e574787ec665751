/* Types shared between percpu.bpf.c and the user-space probe. Fixed-width types only. */
#ifndef KPATH_PERCPU_H
#define KPATH_PERCPU_H

#include "allocation_log.h" /* the allocation log's layout */
#include "live_table.h"     /* the live-allocation table's layout */

/* A caller is one word, so keys stay small and cheap to hash on every allocation:
 *  - the tracepoint's call_site (Linux 5.19+), a kernel text address, always at or above
 *    0xffff000000000000 on x86_64 and arm64; or
 *  - id + 1 below 2^32: an id in the `caller_stacks` map (a hash of the frames), for layouts
 *    and mechanisms without call_site; user space reads the frames and picks the first one
 *    outside the allocator and the tracing plumbing.
 *  - 0: unknown. */
#define PERCPU_CALLER_IS_STACK(caller) ((caller) != 0 && ((caller) >> 32) == 0)
#define PERCPU_CALLER_FRAMES 12 /* frames kept per stack sample */
/* The allocator's exported wrappers around pcpu_alloc (__alloc_percpu_gfp, __alloc_percpu,
 * __alloc_reserved_percpu), whose text the BPF side is told: see allocator_wrapper_begin. */
#define PERCPU_ALLOCATOR_WRAPPERS 3

/* Allocations by process and caller (KPATH_KEYED_COUNTERS alloc_counts). */
struct percpu_alloc_key {
  char comm[16];
  __u64 caller;
  /* Whose process it is when pods are labelled (tunable percpu_owner, enum kpath_owner_kind,
   * probes/bpf/kpath_owner.h): the task's cgroup v2 id or its process id; 0 otherwise. */
  __u64 owner;
};

struct percpu_alloc_value {
  __u64 allocs;
  __u64 bytes; /* across all CPUs, as /proc/meminfo Percpu counts them */
};

/* A live allocation, by its percpu pointer, until percpu_free_percpu names it (the hash map
 * `live_allocs`, where the kernel has no BPF atomics). */
struct percpu_live_alloc {
  __u64 bytes;
  __u64 caller;
};

/* Per-CPU event counters (array map `events`). */
enum percpu_event {
  PERCPU_EVENT_LIVE_MAP_FULL = 0, /* allocation not tracked: its free cannot be matched */
  PERCPU_EVENT_UNTRACKED_FREE,    /* free of memory allocated before kpathd or not tracked */
  PERCPU_EVENT_STACK_ERROR,       /* no stack id: caller unknown */
  PERCPU_EVENT_SELF_CHECK,        /* kpathd's own canary allocation, seen (also counted) */
  PERCPU_EVENT_LOG_FULL, /* allocation log: a record lost, its CPU's log and the spill map full */
  PERCPU_EVENT_MAX,
};

/* kpathd's canary (PercpuAllocProbe::SelfTest): a per-CPU array map of one value of this many
 * bytes, created and closed, which allocates exactly this much per CPU. An unusual size, so that
 * the BPF side's first comparison rarely matches another allocation. */
#define PERCPU_SELF_CHECK_SIZE 4664

#endif
