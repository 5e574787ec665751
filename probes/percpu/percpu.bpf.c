// SPDX-License-Identifier: GPL-2.0
/* Percpu allocations and frees. One program per way to hook the allocator; user space enables
 * exactly one allocation program (and the matching free program) after asking the kernel.
 *
 * Argument layouts of the percpu_alloc_percpu tracepoint:
 *  - since Linux 5.19 (call_site, bytes_alloc and gfp_flags were added to the tracepoint then):
 *      call_site, reserved, is_atomic, size, align, base_addr, off, ptr, bytes_alloc, gfp_flags
 *    bytes_alloc is already the total over all possible CPUs.
 *  - before: reserved, is_atomic, size, align, base_addr, off, ptr
 *    bytes = size x possible CPUs; the caller comes from the kernel stack.
 * tp_btf and raw_tp check argument accesses against the tracepoint's arity (at load or attach),
 * so each layout has its own program. percpu_free_percpu(base_addr, off, ptr) has no size: the
 * size and caller of every live allocation are kept in `live_allocs` until its free. */
#include "kpath_bpf.h"
#include "percpu.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
const volatile __u32 nr_possible_cpus = 1;
const volatile __u32 tp_size_offset = 0; /* classic tracepoint: field offsets */
const volatile __u32 tp_size_size = 0;
const volatile __u32 tp_bytes_alloc_offset = 0; /* 0 when the field is absent */
const volatile __u32 tp_bytes_alloc_size = 0;
const volatile __u32 tp_call_site_offset = 0; /* 0 when the field is absent */
const volatile __u32 tp_ptr_offset = 0;
const volatile __u32 tp_free_ptr_offset = 0;

KPATH_KEYED_COUNTERS(alloc_counts, struct percpu_alloc_key, struct percpu_alloc_value, 1024)
KPATH_KEYED_COUNTERS(caller_balance, struct percpu_caller, struct percpu_balance_value, 1024)

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536); /* user space sets it from the configuration */
  __type(key, __u64);         /* the percpu pointer */
  __type(value, struct percpu_live_alloc);
} live_allocs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, PERCPU_EVENT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} events SEC(".maps");

/* Scratch space for the key (too big for the 512-byte stack with the stack sample). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct percpu_alloc_key);
} scratch SEC(".maps");

static __always_inline void count_event(__u32 event) {
  __u64 *n = bpf_map_lookup_elem(&events, &event);
  if (n) *n += 1;
}

static __always_inline struct percpu_alloc_key *new_key(void) {
  __u32 zero = 0;
  struct percpu_alloc_key *key = bpf_map_lookup_elem(&scratch, &zero);
  if (!key) return NULL;
  __builtin_memset(key, 0, sizeof(*key));
  bpf_get_current_comm(key->comm, sizeof(key->comm));
  return key;
}

/* Fills the caller from the kernel stack (layouts without call_site, fentry, kprobe). */
static __always_inline void caller_from_stack(void *ctx, struct percpu_alloc_key *key) {
  if (bpf_get_stack(ctx, key->caller.frames, sizeof(key->caller.frames), 0) < 0)
    count_event(PERCPU_EVENT_STACK_ERROR);
}

static __always_inline void count_alloc(struct percpu_alloc_key *key, __u64 bytes, __u64 ptr) {
  struct percpu_alloc_value *v = alloc_counts_slot(key);
  if (v) {
    v->allocs += 1;
    v->bytes += bytes;
  }
  if (!ptr) return; /* entry probes (fentry, kprobe) do not know the pointer yet */
  struct percpu_live_alloc live = {.bytes = bytes, .caller = key->caller};
  if (bpf_map_update_elem(&live_allocs, &ptr, &live, BPF_ANY) != 0) {
    count_event(PERCPU_EVENT_LIVE_MAP_FULL);
    return;
  }
  struct percpu_balance_value *b = caller_balance_slot(&key->caller);
  if (b) b->allocated_bytes += bytes;
}

static __always_inline void count_free(__u64 ptr) {
  struct percpu_live_alloc *live = bpf_map_lookup_elem(&live_allocs, &ptr);
  if (!live) {
    count_event(PERCPU_EVENT_UNTRACKED_FREE);
    return;
  }
  struct percpu_balance_value *b = caller_balance_slot(&live->caller);
  if (b) b->freed_bytes += live->bytes;
  bpf_map_delete_elem(&live_allocs, &ptr);
}

/* One allocation program per layout and per mechanism. */
#define PERCPU_ALLOC_PROGRAMS(sec, suffix)                                                     \
  SEC(sec)                                                                                     \
  int BPF_PROG(percpu_alloc_##suffix, unsigned long call_site, bool reserved, bool is_atomic,  \
               size_t size, size_t align, void *base_addr, int off, void *ptr,                 \
               size_t bytes_alloc) {                                                           \
    struct percpu_alloc_key *key = new_key();                                                  \
    if (!key) return 0;                                                                        \
    key->caller.frames[0] = call_site;                                                         \
    count_alloc(key, bytes_alloc, (__u64)ptr);                                                 \
    return 0;                                                                                  \
  }                                                                                            \
  SEC(sec)                                                                                     \
  int BPF_PROG(percpu_alloc_##suffix##_legacy, bool reserved, bool is_atomic, size_t size,     \
               size_t align, void *base_addr, int off, void *ptr) {                            \
    struct percpu_alloc_key *key = new_key();                                                  \
    if (!key) return 0;                                                                        \
    caller_from_stack(ctx, key);                                                               \
    count_alloc(key, (__u64)size * nr_possible_cpus, (__u64)ptr);                              \
    return 0;                                                                                  \
  }

PERCPU_ALLOC_PROGRAMS("tp_btf/percpu_alloc_percpu", tp_btf)
PERCPU_ALLOC_PROGRAMS("raw_tp/percpu_alloc_percpu", raw_tp)

SEC("tp/percpu/percpu_alloc_percpu")
int percpu_alloc_tracepoint(void *ctx) {
  struct percpu_alloc_key *key = new_key();
  if (!key) return 0;
  __u64 bytes;
  if (tp_bytes_alloc_offset) {
    bytes = kpath_tp_field(ctx, tp_bytes_alloc_offset, tp_bytes_alloc_size);
  } else {
    bytes = kpath_tp_field(ctx, tp_size_offset, tp_size_size) * nr_possible_cpus;
  }
  if (tp_call_site_offset) {
    key->caller.frames[0] = kpath_tp_field(ctx, tp_call_site_offset, 8);
  } else {
    caller_from_stack(ctx, key);
  }
  count_alloc(key, bytes, kpath_tp_field(ctx, tp_ptr_offset, 8));
  return 0;
}

SEC("tp_btf/percpu_free_percpu")
int BPF_PROG(percpu_free_tp_btf, void *base_addr, int off, void *ptr) {
  count_free((__u64)ptr);
  return 0;
}

SEC("raw_tp/percpu_free_percpu")
int BPF_PROG(percpu_free_raw_tp, void *base_addr, int off, void *ptr) {
  count_free((__u64)ptr);
  return 0;
}

SEC("tp/percpu/percpu_free_percpu")
int percpu_free_tracepoint(void *ctx) {
  count_free(kpath_tp_field(ctx, tp_free_ptr_offset, 8));
  return 0;
}

/* The allocator's first argument is the per-CPU size in every variant
 * (pcpu_alloc_noprof, pcpu_alloc, __alloc_percpu_gfp); the target is set in user space. At entry
 * the pointer is not known yet, so these mechanisms count allocations but cannot match frees. */
SEC("fentry")
int BPF_PROG(percpu_alloc_fentry, size_t size) {
  struct percpu_alloc_key *key = new_key();
  if (!key) return 0;
  caller_from_stack(ctx, key);
  count_alloc(key, (__u64)size * nr_possible_cpus, 0);
  return 0;
}

SEC("kprobe")
int BPF_KPROBE(percpu_alloc_kprobe, size_t size) {
  struct percpu_alloc_key *key = new_key();
  if (!key) return 0;
  caller_from_stack(ctx, key);
  count_alloc(key, (__u64)size * nr_possible_cpus, 0);
  return 0;
}
