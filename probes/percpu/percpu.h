/* Types shared between percpu.bpf.c and the user-space probe. Fixed-width types only. */
#ifndef KPATH_PERCPU_H
#define KPATH_PERCPU_H

/* Running totals, one slot per CPU (BPF_MAP_TYPE_PERCPU_ARRAY): user space sums the CPUs. */
struct percpu_alloc_totals {
  __u64 allocs;
  __u64 bytes; /* across all CPUs, as /proc/meminfo Percpu counts them */
};

#endif
