// SPDX-License-Identifier: GPL-2.0
/* Percpu allocations: one program per way to hook the allocator. User space enables exactly one
 * of them (bpf_program__set_autoload) after asking the kernel what it has.
 *
 * Argument layouts of the percpu_alloc_percpu tracepoint:
 *  - since Linux 5.19 (call_site, bytes_alloc and gfp_flags were added to the tracepoint then):
 *      call_site, reserved, is_atomic, size, align, base_addr, off, ptr, bytes_alloc, gfp_flags
 *    bytes_alloc is already the total over all possible CPUs.
 *  - before: reserved, is_atomic, size, align, base_addr, off, ptr
 *    bytes = size x possible CPUs.
 * tp_btf and raw_tp check argument accesses against the tracepoint's arity (at load or attach),
 * so each layout has its own program. */
#include "kpath_bpf.h"
#include "percpu.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
const volatile __u32 nr_possible_cpus = 1;
const volatile __u32 tp_size_offset = 0;        /* classic tracepoint: field offsets */
const volatile __u32 tp_size_size = 0;
const volatile __u32 tp_bytes_alloc_offset = 0; /* 0 when the field is absent */
const volatile __u32 tp_bytes_alloc_size = 0;

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct percpu_alloc_totals);
} alloc_totals SEC(".maps");

static __always_inline void count_alloc(__u64 bytes) {
  __u32 key = 0;
  struct percpu_alloc_totals *t = bpf_map_lookup_elem(&alloc_totals, &key);
  if (!t) return;
  t->allocs += 1;
  t->bytes += bytes;
}

SEC("tp_btf/percpu_alloc_percpu")
int BPF_PROG(percpu_alloc_tp_btf, unsigned long call_site, bool reserved, bool is_atomic,
             size_t size, size_t align, void *base_addr, int off, void *ptr, size_t bytes_alloc) {
  count_alloc(bytes_alloc);
  return 0;
}

SEC("tp_btf/percpu_alloc_percpu")
int BPF_PROG(percpu_alloc_tp_btf_legacy, bool reserved, bool is_atomic, size_t size) {
  count_alloc((__u64)size * nr_possible_cpus);
  return 0;
}

SEC("raw_tp/percpu_alloc_percpu")
int BPF_PROG(percpu_alloc_raw_tp, unsigned long call_site, bool reserved, bool is_atomic,
             size_t size, size_t align, void *base_addr, int off, void *ptr, size_t bytes_alloc) {
  count_alloc(bytes_alloc);
  return 0;
}

SEC("raw_tp/percpu_alloc_percpu")
int BPF_PROG(percpu_alloc_raw_tp_legacy, bool reserved, bool is_atomic, size_t size) {
  count_alloc((__u64)size * nr_possible_cpus);
  return 0;
}

SEC("tp/percpu/percpu_alloc_percpu")
int percpu_alloc_tracepoint(void *ctx) {
  if (tp_bytes_alloc_offset) {
    count_alloc(kpath_tp_field(ctx, tp_bytes_alloc_offset, tp_bytes_alloc_size));
  } else {
    count_alloc(kpath_tp_field(ctx, tp_size_offset, tp_size_size) * nr_possible_cpus);
  }
  return 0;
}

/* The allocator's first argument is the per-CPU size in every variant
 * (pcpu_alloc_noprof, pcpu_alloc, __alloc_percpu_gfp); the target is set in user space. */
SEC("fentry")
int BPF_PROG(percpu_alloc_fentry, size_t size) {
  count_alloc((__u64)size * nr_possible_cpus);
  return 0;
}

SEC("kprobe")
int BPF_KPROBE(percpu_alloc_kprobe, size_t size) {
  count_alloc((__u64)size * nr_possible_cpus);
  return 0;
}
