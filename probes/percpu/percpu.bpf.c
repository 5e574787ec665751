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
 * size and caller of every live allocation are kept in `live_table` (or `live_allocs`) until its
 * free. */
// kpath_bpf.h brings vmlinux.h, whose types percpu.h uses: keep this order.
// clang-format off
#include "kpath_bpf.h"
#include "percpu.h"
#include "live_table.bpf.h"
#include "allocation_log.bpf.h"
// clang-format on

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
KPATH_TUNABLE(__u32, nr_possible_cpus, 1);
KPATH_TUNABLE(__u32, tp_size_offset, 0); /* classic tracepoint: field offsets */
KPATH_TUNABLE(__u32, tp_size_size, 0);
KPATH_TUNABLE(__u32, tp_bytes_alloc_offset, 0); /* 0 when the field is absent */
KPATH_TUNABLE(__u32, tp_bytes_alloc_size, 0);
KPATH_TUNABLE(__u32, tp_call_site_offset, 0); /* 0 when the field is absent */
KPATH_TUNABLE(__u32, tp_ptr_offset, 0);
KPATH_TUNABLE(__u32, tp_free_ptr_offset, 0);
/* Name callers from stack samples even where the tracepoint has call_site (configuration
 * percpu.caller_from_stack): the path kernels before 5.19 take, testable on newer ones. */
KPATH_TUNABLE(bool, caller_from_stack_always, false);
/* task_struct.comm from vmlinux BTF, or 0: see kpath_current_comm. */
KPATH_TUNABLE(__u32, task_comm_offset, 0);
/* enum kpath_owner_kind: what the counting keys carry besides comm and caller, for pod labels. */
KPATH_TUNABLE(__u32, percpu_owner, KPATH_OWNER_NONE);
/* With the table and BTF: task_struct.tgid, and kpathd's own tgid. kpathd allocates per-CPU
 * memory for its maps' values at start (thousands of allocations) and keeps it as long as it
 * runs: those go straight to the table's spill part, to leave the hot part to churn. */
KPATH_TUNABLE(__u32, task_tgid_offset, 0);
KPATH_TUNABLE(__s32, self_tgid, 0);
/* kpathd's canary: bytes from self_check_bytes to self_check_bytes + self_check_slack (per-CPU
 * size PERCPU_SELF_CHECK_SIZE x possible CPUs, plus the memcg pointers bytes_alloc may add) by
 * self_tgid. 0: no canary. */
KPATH_TUNABLE(__u64, self_check_bytes, 0);
KPATH_TUNABLE(__u64, self_check_slack, 0);
/* kpathd's pid namespace for kpath_current_is_self (0: the initial one's ids). */
KPATH_TUNABLE(__u64, self_pidns_dev, 0);
KPATH_TUNABLE(__u64, self_pidns_ino, 0);

/* 512 keys per interval: per-CPU hashes preallocate entries x CPUs x 16 bytes of Percpu memory
 * (1 MiB for both buffers of both maps on a 64-CPU host); keys beyond it are counted as "other".
 * The counts by (comm, caller) go through a per-CPU cache first (kpath_bpf.h). */
KPATH_CACHED_KEYED_COUNTERS(alloc_counts, struct percpu_alloc_key, struct percpu_alloc_value, 512)

/* Live allocations, three ways; user space loads the programs of one (percpu_probe.cpp):
 *  - the allocation log (programs with suffix _log, allocation_log.bpf.h): each CPU appends its
 *    allocations and frees to logs of its own and user space matches them. No shared line on
 *    the event path: the way with the least cost per event where BPF atomics exist.
 *  - `live_table` (programs without suffix): the open-addressing table of live_table.bpf.h,
 *    claimed with compare-and-swap, which the verifier accepts since Linux 5.12. An insert or a
 *    removal is a multiply and, mostly, one cache line of the hot part; the bytes allocated and
 *    freed are counted by caller in `live_balance`.
 *  - `live_allocs` (programs with suffix _hash): a hash map, and the bytes allocated and freed
 *    counted by caller in `caller_balance`. Kernels without BPF atomics; about 3x the cost.
 * User space sizes the one in use from percpu.max_tracked_allocations and the other to 1. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64); /* the percpu pointer */
  __type(value, struct percpu_live_alloc);
} live_allocs SEC(".maps");

KPATH_KEYED_COUNTERS(caller_balance, __u64, struct percpu_balance_value, 512)

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

/* The text [begin, end) of the allocator's wrappers (PERCPU_ALLOCATOR_WRAPPERS, from kallsyms;
 * 0 and 0 when absent). The tracepoint's call_site is pcpu_alloc's return address: the real
 * caller where a wrapper tail-calls pcpu_alloc (x86), but the wrapper itself where it calls it
 * with a return (Debian 12's arm64 6.1: `bl pcpu_alloc` between paciasp and autiasp). There the
 * caller comes from the stack instead. */
KPATH_TUNABLE_ARRAY(__u64, allocator_wrapper_begin, PERCPU_ALLOCATOR_WRAPPERS);
KPATH_TUNABLE_ARRAY(__u64, allocator_wrapper_end, PERCPU_ALLOCATOR_WRAPPERS);

static __always_inline bool in_allocator_wrapper(__u64 address) {
  bool in = false;
#ifndef KPATH_NO_GLOBAL_DATA
  /* Kernels without global data (before 5.2) have no call_site in the tracepoint (5.19+): the
   * caller always comes from the stack there (and that build has no arrays to read). */
#pragma unroll
  for (int i = 0; i < PERCPU_ALLOCATOR_WRAPPERS; i++) {
    in |= address - allocator_wrapper_begin[i] <
          allocator_wrapper_end[i] - allocator_wrapper_begin[i];
  }
#endif
  return in;
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

static __always_inline void count_alloc(const char* task, __u64 caller, __u64 bytes) {
  /* kpathd's canary: seen, and counted as the allocation it is (kpathd's own allocations always
   * were). In this order, so that other allocations pay one subtraction and one comparison. */
  if (bytes - self_check_bytes <= self_check_slack && self_check_bytes &&
      kpath_current_is_self(self_tgid, self_pidns_dev, self_pidns_ino)) {
    count_event(PERCPU_EVENT_SELF_CHECK);
  }
  if (KPATH_ABLATED(COUNT)) return;
  struct percpu_alloc_key key = {.caller = caller, .owner = kpath_current_owner(percpu_owner)};
  kpath_task_comm(key.comm, task, task_comm_offset);
  bool created = false;
  struct percpu_alloc_value* v = alloc_counts_cached_slot(alloc_counts_buffer(), &key, &created);
  if (v) {
    v->allocs += 1;
    v->bytes += bytes;
  }
}

static __always_inline void live_hash_insert(__u64 ptr, __u64 bytes, __u64 caller) {
  struct percpu_live_alloc live = {.bytes = bytes, .caller = caller};
  if (bpf_map_update_elem(&live_allocs, &ptr, &live, BPF_ANY) != 0) {
    count_event(PERCPU_EVENT_LIVE_MAP_FULL);
    return;
  }
  struct percpu_balance_value* b = caller_balance_slot(&caller);
  if (b) b->allocated_bytes += bytes;
}

static __always_inline void live_hash_remove(__u64 ptr) {
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

/* The way live allocations are kept (see above). A constant at every call: each program holds one
 * way only, and the _hash programs no atomic instruction (which kernels before 5.12 refuse even
 * in dead code). */
enum percpu_way { WAY_HASH, WAY_TABLE, WAY_LOG };

static __always_inline void count_tracked_alloc(enum percpu_way way, __u64 caller, __u64 bytes,
                                                __u64 ptr) {
  const bool table = way == WAY_TABLE;
  if (KPATH_ABLATED(RETURN)) {
    kpath_ablation_sink(caller ^ bytes ^ ptr);
    return;
  }
  if (table && !KPATH_ABLATED(TRACK)) live_table_prefetch(ptr);
  const char* task = kpath_current_task(task_comm_offset);
  count_alloc(task, caller, bytes);
  if (KPATH_ABLATED(TRACK)) return;
  if (way == WAY_LOG) {
    if (!plog_append_alloc(ptr, bytes, caller)) count_event(PERCPU_EVENT_LOG_FULL);
  } else if (table) {
    bool own =
        self_tgid && task_tgid_offset && *(const __s32*)(task + task_tgid_offset) == self_tgid;
    if (!live_table_insert(ptr, bytes, caller, own)) count_event(PERCPU_EVENT_LIVE_MAP_FULL);
  } else {
    live_hash_insert(ptr, bytes, caller);
  }
}

static __always_inline int count_free(enum percpu_way way, __u64 ptr) {
  if (KPATH_ABLATED(RETURN) || KPATH_ABLATED(TRACK)) {
    kpath_ablation_sink(ptr);
    return 0;
  }
  if (way == WAY_LOG) {
    if (!plog_append_free(ptr)) count_event(PERCPU_EVENT_LOG_FULL);
  } else if (way == WAY_TABLE) {
    if (!live_table_remove(ptr)) count_event(PERCPU_EVENT_UNTRACKED_FREE);
  } else {
    live_hash_remove(ptr);
  }
  return 0;
}

static __always_inline int alloc_tracepoint(enum percpu_way way, void* ctx) {
  __u64 bytes;
  if (tp_bytes_alloc_offset) {
    bytes = kpath_tp_field(ctx, tp_bytes_alloc_offset, tp_bytes_alloc_size);
  } else {
    bytes = kpath_tp_field(ctx, tp_size_offset, tp_size_size) * nr_possible_cpus;
  }
  __u64 caller = tp_call_site_offset && !caller_from_stack_always
                     ? kpath_tp_field(ctx, tp_call_site_offset, 8)
                     : 0;
  if (caller == 0 || in_allocator_wrapper(caller)) caller = caller_from_stack(ctx);
  count_tracked_alloc(way, caller, bytes, kpath_tp_field(ctx, tp_ptr_offset, 8));
  return 0;
}

/* The layout since 5.19 through tp_btf or raw_tp (arguments as listed at the top). The highest
 * argument read, bytes_alloc (the 9th), is what tp_btf's load and raw_tp's attach check against
 * the tracepoint's arity. */
static __always_inline int alloc_with_call_site(enum percpu_way way, __u64* args) {
  __u64 caller =
      caller_from_stack_always || in_allocator_wrapper(args[0]) ? caller_from_stack(args) : args[0];
  count_tracked_alloc(way, caller, args[8], args[7]);
  return 0;
}

/* The layout before 5.19: ptr, the 7th argument, is the highest read. */
static __always_inline int alloc_legacy(enum percpu_way way, __u64* args) {
  count_tracked_alloc(way, caller_from_stack(args), args[2] * nr_possible_cpus, args[6]);
  return 0;
}

/* percpu_free_percpu(base_addr, off, ptr): tp_btf and raw_tp read ptr as their third argument. */
static __always_inline int free_tracepoint(enum percpu_way way, void* ctx) {
  return count_free(way, kpath_tp_field(ctx, tp_free_ptr_offset, 8));
}

/* Every program that sees the pointer: per layout of percpu_alloc_percpu, per mechanism, and the
 * frees, once for each way of keeping live allocations (suffixes: none, _hash, _log). */
SEC("tp_btf/percpu_alloc_percpu")
int percpu_alloc_tp_btf(__u64* ctx) { return alloc_with_call_site(WAY_TABLE, ctx); }

SEC("tp_btf/percpu_alloc_percpu")
int percpu_alloc_tp_btf_legacy(__u64* ctx) { return alloc_legacy(WAY_TABLE, ctx); }

SEC("raw_tp/percpu_alloc_percpu")
int percpu_alloc_raw_tp(__u64* ctx) { return alloc_with_call_site(WAY_TABLE, ctx); }

SEC("raw_tp/percpu_alloc_percpu")
int percpu_alloc_raw_tp_legacy(__u64* ctx) { return alloc_legacy(WAY_TABLE, ctx); }

SEC("tp/percpu/percpu_alloc_percpu")
int percpu_alloc_tracepoint(void* ctx) { return alloc_tracepoint(WAY_TABLE, ctx); }

SEC("tp_btf/percpu_free_percpu")
int percpu_free_tp_btf(__u64* ctx) { return count_free(WAY_TABLE, ctx[2]); }

SEC("raw_tp/percpu_free_percpu")
int percpu_free_raw_tp(__u64* ctx) { return count_free(WAY_TABLE, ctx[2]); }

SEC("tp/percpu/percpu_free_percpu")
int percpu_free_tracepoint(void* ctx) { return free_tracepoint(WAY_TABLE, ctx); }

SEC("tp_btf/percpu_alloc_percpu")
int percpu_alloc_tp_btf_hash(__u64* ctx) { return alloc_with_call_site(WAY_HASH, ctx); }

SEC("tp_btf/percpu_alloc_percpu")
int percpu_alloc_tp_btf_legacy_hash(__u64* ctx) { return alloc_legacy(WAY_HASH, ctx); }

SEC("raw_tp/percpu_alloc_percpu")
int percpu_alloc_raw_tp_hash(__u64* ctx) { return alloc_with_call_site(WAY_HASH, ctx); }

SEC("raw_tp/percpu_alloc_percpu")
int percpu_alloc_raw_tp_legacy_hash(__u64* ctx) { return alloc_legacy(WAY_HASH, ctx); }

SEC("tp/percpu/percpu_alloc_percpu")
int percpu_alloc_tracepoint_hash(void* ctx) { return alloc_tracepoint(WAY_HASH, ctx); }

SEC("tp_btf/percpu_free_percpu")
int percpu_free_tp_btf_hash(__u64* ctx) { return count_free(WAY_HASH, ctx[2]); }

SEC("raw_tp/percpu_free_percpu")
int percpu_free_raw_tp_hash(__u64* ctx) { return count_free(WAY_HASH, ctx[2]); }

SEC("tp/percpu/percpu_free_percpu")
int percpu_free_tracepoint_hash(void* ctx) { return free_tracepoint(WAY_HASH, ctx); }

SEC("tp_btf/percpu_alloc_percpu")
int percpu_alloc_tp_btf_log(__u64* ctx) { return alloc_with_call_site(WAY_LOG, ctx); }

SEC("tp_btf/percpu_alloc_percpu")
int percpu_alloc_tp_btf_legacy_log(__u64* ctx) { return alloc_legacy(WAY_LOG, ctx); }

SEC("raw_tp/percpu_alloc_percpu")
int percpu_alloc_raw_tp_log(__u64* ctx) { return alloc_with_call_site(WAY_LOG, ctx); }

SEC("raw_tp/percpu_alloc_percpu")
int percpu_alloc_raw_tp_legacy_log(__u64* ctx) { return alloc_legacy(WAY_LOG, ctx); }

SEC("tp/percpu/percpu_alloc_percpu")
int percpu_alloc_tracepoint_log(void* ctx) { return alloc_tracepoint(WAY_LOG, ctx); }

SEC("tp_btf/percpu_free_percpu")
int percpu_free_tp_btf_log(__u64* ctx) { return count_free(WAY_LOG, ctx[2]); }

SEC("raw_tp/percpu_free_percpu")
int percpu_free_raw_tp_log(__u64* ctx) { return count_free(WAY_LOG, ctx[2]); }

SEC("tp/percpu/percpu_free_percpu")
int percpu_free_tracepoint_log(void* ctx) { return free_tracepoint(WAY_LOG, ctx); }

/* The allocator's first argument is the per-CPU size in every variant
 * (pcpu_alloc_noprof, pcpu_alloc, __alloc_percpu_gfp); the target is set in user space. At entry
 * the pointer is not known yet, so these mechanisms count allocations but cannot match frees.
 * The allocator rounds the size up to PCPU_MIN_ALLOC_SIZE (4) before allocating (and before its
 * tracepoint reports `size`): so do these. */
#define PERCPU_ALLOCATED_SIZE(size) (((__u64)(size) + 3) & ~3ULL)

SEC("fentry")
int BPF_PROG(percpu_alloc_fentry, size_t size) {
  count_alloc(kpath_current_task(task_comm_offset), caller_from_stack(ctx),
              PERCPU_ALLOCATED_SIZE(size) * nr_possible_cpus);
  return 0;
}

SEC("kprobe")
int percpu_alloc_kprobe(struct pt_regs* ctx) {
  __u64 size = KPATH_KPROBE_ARG1(ctx);
  count_alloc(kpath_current_task(task_comm_offset), caller_from_stack(ctx),
              PERCPU_ALLOCATED_SIZE(size) * nr_possible_cpus);
  return 0;
}
