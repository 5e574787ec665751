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
// kpath_bpf.h brings vmlinux.h, whose types percpu.h uses: keep this order.
// clang-format off
#include "kpath_bpf.h"
#include "percpu.h"
// clang-format on

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
/* Name callers from stack samples even where the tracepoint has call_site (configuration
 * percpu.caller_from_stack): the path kernels before 5.19 take, testable on newer ones. */
const volatile bool caller_from_stack_always = false;

/* 512 keys per interval: per-CPU hashes preallocate entries x CPUs x 16 bytes of Percpu memory
 * (1 MiB for both buffers of both maps on a 64-CPU host); keys beyond it are counted as "other". */
KPATH_KEYED_COUNTERS(alloc_counts, struct percpu_alloc_key, struct percpu_alloc_value, 512)
KPATH_KEYED_COUNTERS(caller_balance, __u64, struct percpu_balance_value, 512)

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536); /* user space sets it from the configuration */
  __type(key, __u64);         /* the percpu pointer */
  __type(value, struct percpu_live_alloc);
} live_allocs SEC(".maps");

/* Kernel stacks of callers on layouts without call_site (and for fentry, kprobe), keyed by a
 * hash of the frames: ids are stable per distinct stack. Not a STACK_TRACE map: there a stack
 * whose bucket another stack took first gets no id, for as long as kpathd runs (seen under QEMU:
 * one of the memcg allocation stacks "unknown" in some runs); here only a 31-bit hash collision
 * can merge two stacks, and the least recently seen stacks make room for new ones. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, PERCPU_CALLER_FRAMES * sizeof(__u64));
} caller_stacks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, PERCPU_EVENT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} events SEC(".maps");

static __always_inline void count_event(__u32 event) {
  __u64* n = bpf_map_lookup_elem(&events, &event);
  if (n) *n += 1;
}

/* The caller word from a stack sample (layouts without call_site, fentry, kprobe). */
static __always_inline __u64 caller_from_stack(void* ctx) {
  __u64 frames[PERCPU_CALLER_FRAMES] = {};
  if (bpf_get_stack(ctx, frames, sizeof(frames), 0) < 0) {
    count_event(PERCPU_EVENT_STACK_ERROR);
    return 0;
  }
  __u64 hash = 0xcbf29ce484222325ULL; /* FNV-1a over the frames */
#pragma unroll                        /* kernels before 5.3 take no loops */
  for (int i = 0; i < PERCPU_CALLER_FRAMES; i++) hash = (hash ^ frames[i]) * 0x100000001b3ULL;
  __u32 id = (__u32)(hash ^ (hash >> 32)) & 0x7fffffff;
  if (!bpf_map_lookup_elem(&caller_stacks, &id) &&
      bpf_map_update_elem(&caller_stacks, &id, frames, BPF_ANY) != 0) {
    count_event(PERCPU_EVENT_STACK_ERROR);
    return 0;
  }
  return (__u64)id + 1;
}

static __always_inline void count_alloc(__u64 caller, __u64 bytes, __u64 ptr) {
  struct percpu_alloc_key key = {.caller = caller};
  bpf_get_current_comm(key.comm, sizeof(key.comm));
  struct percpu_alloc_value* v = alloc_counts_slot(&key);
  if (v) {
    v->allocs += 1;
    v->bytes += bytes;
  }
  if (!ptr) return; /* entry probes (fentry, kprobe) do not know the pointer yet */
  struct percpu_live_alloc live = {.bytes = bytes, .caller = caller};
  if (bpf_map_update_elem(&live_allocs, &ptr, &live, BPF_ANY) != 0) {
    count_event(PERCPU_EVENT_LIVE_MAP_FULL);
    return;
  }
  struct percpu_balance_value* b = caller_balance_slot(&caller);
  if (b) b->allocated_bytes += bytes;
}

static __always_inline void count_free(__u64 ptr) {
  struct percpu_live_alloc* live = bpf_map_lookup_elem(&live_allocs, &ptr);
  if (!live) {
    count_event(PERCPU_EVENT_UNTRACKED_FREE);
    return;
  }
  __u64 caller = live->caller;
  struct percpu_balance_value* b = caller_balance_slot(&caller);
  if (b) b->freed_bytes += live->bytes;
  bpf_map_delete_elem(&live_allocs, &ptr);
}

/* One allocation program per layout and per mechanism. */
#define PERCPU_ALLOC_PROGRAMS(sec, suffix)                                                    \
  SEC(sec)                                                                                    \
  int BPF_PROG(percpu_alloc_##suffix, unsigned long call_site, bool reserved, bool is_atomic, \
               size_t size, size_t align, void* base_addr, int off, void* ptr,                \
               size_t bytes_alloc) {                                                          \
    __u64 caller = caller_from_stack_always ? caller_from_stack(ctx) : call_site;             \
    count_alloc(caller, bytes_alloc, (__u64)ptr);                                             \
    return 0;                                                                                 \
  }                                                                                           \
  SEC(sec)                                                                                    \
  int BPF_PROG(percpu_alloc_##suffix##_legacy, bool reserved, bool is_atomic, size_t size,    \
               size_t align, void* base_addr, int off, void* ptr) {                           \
    count_alloc(caller_from_stack(ctx), (__u64)size* nr_possible_cpus, (__u64)ptr);           \
    return 0;                                                                                 \
  }

PERCPU_ALLOC_PROGRAMS("tp_btf/percpu_alloc_percpu", tp_btf)
PERCPU_ALLOC_PROGRAMS("raw_tp/percpu_alloc_percpu", raw_tp)

SEC("tp/percpu/percpu_alloc_percpu")
int percpu_alloc_tracepoint(void* ctx) {
  __u64 bytes;
  if (tp_bytes_alloc_offset) {
    bytes = kpath_tp_field(ctx, tp_bytes_alloc_offset, tp_bytes_alloc_size);
  } else {
    bytes = kpath_tp_field(ctx, tp_size_offset, tp_size_size) * nr_possible_cpus;
  }
  __u64 caller = tp_call_site_offset && !caller_from_stack_always
                     ? kpath_tp_field(ctx, tp_call_site_offset, 8)
                     : caller_from_stack(ctx);
  count_alloc(caller, bytes, kpath_tp_field(ctx, tp_ptr_offset, 8));
  return 0;
}

SEC("tp_btf/percpu_free_percpu")
int BPF_PROG(percpu_free_tp_btf, void* base_addr, int off, void* ptr) {
  count_free((__u64)ptr);
  return 0;
}

SEC("raw_tp/percpu_free_percpu")
int BPF_PROG(percpu_free_raw_tp, void* base_addr, int off, void* ptr) {
  count_free((__u64)ptr);
  return 0;
}

SEC("tp/percpu/percpu_free_percpu")
int percpu_free_tracepoint(void* ctx) {
  count_free(kpath_tp_field(ctx, tp_free_ptr_offset, 8));
  return 0;
}

/* The allocator's first argument is the per-CPU size in every variant
 * (pcpu_alloc_noprof, pcpu_alloc, __alloc_percpu_gfp); the target is set in user space. At entry
 * the pointer is not known yet, so these mechanisms count allocations but cannot match frees.
 * The allocator rounds the size up to PCPU_MIN_ALLOC_SIZE (4) before allocating (and before its
 * tracepoint reports `size`): so do these. */
#define PERCPU_ALLOCATED_SIZE(size) (((__u64)(size) + 3) & ~3ULL)

SEC("fentry")
int BPF_PROG(percpu_alloc_fentry, size_t size) {
  count_alloc(caller_from_stack(ctx), PERCPU_ALLOCATED_SIZE(size) * nr_possible_cpus, 0);
  return 0;
}

SEC("kprobe")
int percpu_alloc_kprobe(struct pt_regs* ctx) {
  __u64 size = KPATH_KPROBE_ARG1(ctx);
  count_alloc(caller_from_stack(ctx), PERCPU_ALLOCATED_SIZE(size) * nr_possible_cpus, 0);
  return 0;
}
