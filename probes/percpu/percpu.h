/* Types shared between percpu.bpf.c and the user-space probe. Fixed-width types only. */
#ifndef KPATH_PERCPU_H
#define KPATH_PERCPU_H

/* Return addresses kept to name the caller. The 5.19+ tracepoint gives call_site directly
 * (frames[0], the rest 0); elsewhere the kernel stack is sampled and user space picks the first
 * frame outside the allocator and the tracing plumbing. */
#define PERCPU_CALLER_FRAMES 8

struct percpu_caller {
  __u64 frames[PERCPU_CALLER_FRAMES];
};

/* Allocations by process and caller (KPATH_KEYED_COUNTERS alloc_counts). */
struct percpu_alloc_key {
  char comm[16];
  struct percpu_caller caller;
};

struct percpu_alloc_value {
  __u64 allocs;
  __u64 bytes; /* across all CPUs, as /proc/meminfo Percpu counts them */
};

/* A live allocation, by its percpu pointer, until percpu_free_percpu names it. */
struct percpu_live_alloc {
  __u64 bytes;
  struct percpu_caller caller;
};

/* Per caller: bytes of tracked allocations and of their frees (KPATH_KEYED_COUNTERS
 * caller_balance). Outstanding = allocated - freed, summed in user space. */
struct percpu_balance_value {
  __u64 allocated_bytes;
  __u64 freed_bytes;
};

/* Per-CPU event counters (array map `events`). */
enum percpu_event {
  PERCPU_EVENT_LIVE_MAP_FULL = 0, /* allocation not tracked: its free cannot be matched */
  PERCPU_EVENT_UNTRACKED_FREE,    /* free of memory allocated before kpathd or not tracked */
  PERCPU_EVENT_STACK_ERROR,       /* bpf_get_stack failed: caller unknown */
  PERCPU_EVENT_MAX,
};

#endif
