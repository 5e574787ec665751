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
/* task_struct.comm from vmlinux BTF, or 0: see kpath_current_comm. */
const volatile __u32 task_comm_offset = 0;
/* With the table and BTF: task_struct.tgid, and kpathd's own tgid. kpathd allocates per-CPU
 * memory for its maps' values at start (thousands of allocations) and keeps it as long as it
 * runs: those go straight to the table's spill part, to leave the hot part to churn. */
const volatile __u32 task_tgid_offset = 0;
const volatile __s32 self_tgid = 0;

/* 512 keys per interval: per-CPU hashes preallocate entries x CPUs x 16 bytes of Percpu memory
 * (1 MiB for both buffers of both maps on a 64-CPU host); keys beyond it are counted as "other".
 * The counts by (comm, caller) go through a per-CPU cache first (kpath_bpf.h). */
KPATH_CACHED_KEYED_COUNTERS(alloc_counts, struct percpu_alloc_key, struct percpu_alloc_value, 512)

/* Live allocations, two ways; user space loads the programs of one (percpu_probe.cpp):
 *  - `live_table` (programs without suffix): the open-addressing table of percpu.h, claimed with
 *    compare-and-swap, which the verifier accepts since Linux 5.12. An insert or a removal is a
 *    multiply and, mostly, one cache line of the hot part; the bytes allocated and freed are
 *    counted by caller in `live_balance`.
 *  - `live_allocs` (programs with suffix _hash): a hash map, and the bytes allocated and freed
 *    counted by caller in `caller_balance`. Kernels without BPF atomics; about 3x the cost.
 * User space sizes the one in use from percpu.max_tracked_allocations and the other to 1. */
const volatile __u32 live_table_bits = 17; /* log2 of the spill part's slots */

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, PERCPU_LIVE_HOT_SLOTS + (1 << 17));
  __type(key, __u32);
  __type(value, struct percpu_live_slot);
} live_table SEC(".maps");

/* The callers of live allocations, for the table's slots (and live_balance) to name them by a
 * small index (percpu.h); user space reads it in place. Never emptied: callers are kernel
 * functions, a few hundred at most (or stack ids, without call_site). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, PERCPU_LIVE_CALLERS);
  __type(key, __u32);
  __type(value, __u64);
} live_callers SEC(".maps");

/* Per CPU, by caller index: bytes of tracked allocations and of their frees. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct percpu_live_balance);
} live_balance SEC(".maps");

/* The sampling interval's number, which user space counts up: the age of a live allocation. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} live_epoch SEC(".maps");

/* Live allocations in the spill part: while there are none, a free whose pointer is not in the
 * hot part is known untracked without touching the spill part's cold slots. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __s64);
} live_spilled SEC(".maps");

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
  struct percpu_alloc_key key = {.caller = caller};
  kpath_task_comm(key.comm, task, task_comm_offset);
  bool created = false;
  struct percpu_alloc_value* v = alloc_counts_cached_slot(alloc_counts_buffer(), &key, &created);
  if (v) {
    v->allocs += 1;
    v->bytes += bytes;
  }
}

static __always_inline struct percpu_live_slot* live_slot(__u32 index) {
  return bpf_map_lookup_elem(&live_table, &index);
}

/* Claims an empty or freed slot for `ptr` among `probes` slots from `home` (masked by `mask`,
 * offset by `base`), writes `info` and settles it; false if all are taken. Where stores may be
 * seen out of order (arm64), a reader that sees `ptr` settled before `info` finds the check bits
 * wrong. */
static __always_inline bool live_claim(__u32 base, __u32 home, __u32 mask, __u32 probes, __u64 ptr,
                                       __u64 info) {
#pragma clang loop unroll(disable)
  for (__u32 i = 0; i < probes; i++) {
    struct percpu_live_slot* slot = live_slot(base + ((home + i) & mask));
    if (!slot) return false;
    __u64 seen = slot->ptr;
    if (!PERCPU_LIVE_IS_FREE(seen)) continue;
    if (__sync_val_compare_and_swap(&slot->ptr, seen, ptr | PERCPU_LIVE_FILLING) != seen) continue;
    slot->info = info;
    slot->ptr = ptr;
    return true;
  }
  return false;
}

/* The index of `caller` in live_callers, adding it if new (0 for "unknown"); -1 if its probe
 * slots are all other callers'. */
static __always_inline int live_caller_index(__u64 caller) {
  if (!caller) return 0;
  __u32 home = (__u32)((caller * KPATH_HASH_MUL) >> (64 - PERCPU_LIVE_CALLER_BITS));
#pragma clang loop unroll(disable)
  for (__u32 i = 0; i < PERCPU_LIVE_HOT_PROBES; i++) {
    __u32 index = (home + i) & (PERCPU_LIVE_CALLERS - 1);
    if (index == 0) continue; /* reserved for "unknown" */
    __u64* known = bpf_map_lookup_elem(&live_callers, &index);
    if (!known) return -1;
    __u64 seen = *known;
    if (seen == caller) return (int)index;
    if (seen == 0) {
      seen = __sync_val_compare_and_swap(known, 0, caller);
      if (seen == 0 || seen == caller) return (int)index;
    }
  }
  return -1;
}

/* Frees `ptr`'s slot among `probes` slots from `home` and returns its info; 0 if it is not
 * there (or moved on to the spill part meanwhile). A probe sequence ends at an empty slot:
 * inserts take the first free one, and slots never become empty again, so `ptr` is not beyond
 * it. The info is read before the slot is freed: while the slot holds `ptr`, it is `ptr`'s. */
static __always_inline __u64 live_release(__u32 base, __u32 home, __u32 mask, __u32 probes,
                                          __u64 ptr) {
#pragma clang loop unroll(disable)
  for (__u32 i = 0; i < probes; i++) {
    struct percpu_live_slot* slot = live_slot(base + ((home + i) & mask));
    if (!slot) return 0;
    __u64 seen = slot->ptr;
    if (seen == PERCPU_LIVE_EMPTY) return 0;
    if (seen != ptr && seen != (ptr | PERCPU_LIVE_MOVING)) continue;
    __u64 info = slot->info;
    if (__sync_val_compare_and_swap(&slot->ptr, seen, PERCPU_LIVE_FREED) == seen) return info;
    /* A move started meanwhile: the pointer is freed as moving (and the move then undone). */
    __u64 moving = ptr | PERCPU_LIVE_MOVING;
    if (seen == ptr && __sync_val_compare_and_swap(&slot->ptr, moving, PERCPU_LIVE_FREED) == moving)
      return info;
    return 0;
  }
  return 0;
}

/* The first slot to probe for a pointer, in each part: the top bits of multiplicative hashes. */
static __always_inline __u32 live_hot_home(__u64 ptr) {
  /* The start of a 64-byte line: the first four probes are one cache miss. */
  return (__u32)((ptr * KPATH_HASH_MUL) >> (64 - PERCPU_LIVE_HOT_BITS)) & ~3U;
}
static __always_inline __u32 live_spill_home(__u64 ptr) {
  return (__u32)(((ptr ^ (ptr >> 29)) * 0xff51afd7ed558ccdULL) >> (64 - live_table_bits));
}

#define LIVE_HOT 0, live_hot_home(ptr), PERCPU_LIVE_HOT_SLOTS - 1, PERCPU_LIVE_HOT_PROBES
#define LIVE_SPILL(p) \
  PERCPU_LIVE_HOT_SLOTS, live_spill_home(p), (1U << live_table_bits) - 1, PERCPU_LIVE_PROBES

/* Pointers in the spill part: while there are none, a free not found in the hot part is known
 * untracked without a (cold) look at the spill part. */
static __always_inline __s64* live_spilled_count(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&live_spilled, &zero);
}

static __always_inline bool live_spill(__u64 ptr, __u64 info) {
  if (!live_claim(LIVE_SPILL(ptr), ptr, info)) return false;
  __s64* spilled = live_spilled_count();
  if (spilled) __sync_fetch_and_add(spilled, 1);
  return true;
}

static __always_inline __u64 live_unspill(__u64 ptr) {
  __u64 info = live_release(LIVE_SPILL(ptr), ptr);
  if (!info) return 0;
  __s64* spilled = live_spilled_count();
  if (spilled) __sync_fetch_and_add(spilled, -1);
  return info;
}

/* Bytes allocated and freed by caller index (the outstanding bytes: their difference, summed
 * over CPUs by user space); a free counts the size its allocation was tracked with. */
static __always_inline void live_balance_add(__u64 info, bool freed) {
  __u32 zero = 0;
  struct percpu_live_balance* balance = bpf_map_lookup_elem(&live_balance, &zero);
  if (!balance) return;
  struct percpu_balance_value* b =
      &balance->callers[PERCPU_LIVE_INFO_CALLER(info) & (PERCPU_LIVE_CALLERS - 1)];
  if (freed) {
    b->freed_bytes += PERCPU_LIVE_INFO_BYTES(info);
  } else {
    b->allocated_bytes += PERCPU_LIVE_INFO_BYTES(info);
  }
}

/* The index of the oldest settled pointer in `probes` hot slots from `home`, or -1; its age in
 * intervals in *age. */
static __always_inline int live_oldest(__u32 home, __u32 probes, __u32 epoch, __u32* age) {
  int oldest = -1;
#pragma clang loop unroll(disable)
  for (__u32 i = 0; i < probes; i++) {
    __u32 index = (home + i) & (PERCPU_LIVE_HOT_SLOTS - 1);
    struct percpu_live_slot* slot = live_slot(index);
    if (!slot) break;
    if (!PERCPU_LIVE_IS_SETTLED(slot->ptr)) continue;
    __u32 slot_age = (epoch - (__u32)PERCPU_LIVE_INFO_EPOCH(slot->info)) & 0xff;
    if (oldest < 0 || slot_age > *age) {
      oldest = (int)index;
      *age = slot_age;
    }
  }
  return oldest;
}

/* Moves the pointer in hot slot `index` to the spill part and gives the slot to `ptr`. False if
 * that pointer is not settled or the spill part has no room. */
static __always_inline bool live_evict(__u32 index, __u64 ptr, __u64 info) {
  struct percpu_live_slot* slot = live_slot(index);
  if (!slot) return false;
  __u64 victim = slot->ptr;
  __u64 victim_info = slot->info;
  /* Settled, and its info complete (arm64 may show the pointer before the info). */
  if (!PERCPU_LIVE_IS_SETTLED(victim) || !PERCPU_LIVE_INFO_VALID(victim, victim_info)) {
    return false;
  }
  __u64 moving = victim | PERCPU_LIVE_MOVING;
  if (__sync_val_compare_and_swap(&slot->ptr, victim, moving) != victim) return false;
  if (!live_spill(victim, victim_info)) {
    /* No room: the victim stays, unless it was freed meanwhile, which frees its slot. */
    if (__sync_val_compare_and_swap(&slot->ptr, moving, victim) == moving) return false;
    return live_claim(LIVE_HOT, ptr, info);
  }
  if (__sync_val_compare_and_swap(&slot->ptr, moving, ptr | PERCPU_LIVE_FILLING) == moving) {
    slot->info = info;
    slot->ptr = ptr;
    return true;
  }
  /* The victim was freed while it moved: its copy goes too, and `ptr` takes a free slot. */
  live_unspill(victim);
  return live_claim(LIVE_HOT, ptr, info);
}

/* Into the hot part, keeping each pointer in the first cache line of its slots where possible:
 * a free slot there; else, if the oldest pointer there is from an earlier interval, its slot;
 * else a free slot in the second line; else the oldest pointer's slot in both. Long-lived
 * pointers so leave the lines that churn uses, and frees mostly look at one line. */
static __always_inline bool live_hot_insert(__u64 ptr, __u64 info, __u32 epoch) {
  __u32 home = live_hot_home(ptr);
  const __u32 line = PERCPU_LIVE_HOT_PROBES / 2;
  if (live_claim(0, home, PERCPU_LIVE_HOT_SLOTS - 1, line, ptr, info)) return true;
  __u32 age = 0;
  int oldest = live_oldest(home, line, epoch, &age);
  if (oldest >= 0 && age > 0 && live_evict((__u32)oldest, ptr, info)) return true;
  if (live_claim(0, home + line, PERCPU_LIVE_HOT_SLOTS - 1, line, ptr, info)) return true;
  oldest = live_oldest(home, PERCPU_LIVE_HOT_PROBES, epoch, &age);
  return oldest >= 0 && live_evict((__u32)oldest, ptr, info);
}

static __always_inline void live_table_insert(__u64 ptr, __u64 bytes, __u64 caller,
                                              bool long_lived) {
  if (!PERCPU_LIVE_IS_SETTLED(ptr)) return;
  int caller_index = live_caller_index(caller);
  if (caller_index >= 0) {
    __u32 zero = 0;
    __u32* now = bpf_map_lookup_elem(&live_epoch, &zero);
    __u32 epoch = now ? *now : 0;
    __u64 info = PERCPU_LIVE_INFO(ptr, bytes, (__u64)caller_index, epoch);
    if ((!long_lived && live_hot_insert(ptr, info, epoch)) || live_spill(ptr, info)) {
      live_balance_add(info, false);
      return;
    }
  }
  count_event(PERCPU_EVENT_LIVE_MAP_FULL);
}

/* A pointer is freed only after its allocation's tracepoint returned, and allocated again only
 * after its free's tracepoint returned (it runs under pcpu_lock): per pointer, inserts and
 * removals never overlap, and a live pointer is in the table once (twice, briefly, while it
 * moves: the hot slot, marked moving, is the one a free takes). */
static __always_inline void live_table_remove(__u64 ptr) {
  __u64 info = live_release(LIVE_HOT, ptr);
  if (!info) {
    __s64* spilled = live_spilled_count();
    if (!spilled) return;
#if defined(__TARGET_ARCH_x86)
    __s64 in_spill = *spilled; /* loads are not reordered on x86 */
#else
    /* A full barrier: the count is read after the hot slot that showed the pointer gone. */
    __s64 in_spill = __sync_fetch_and_add(spilled, 0);
#endif
    if (in_spill > 0) info = live_unspill(ptr);
  }
  if (info) {
    live_balance_add(info, true);
  } else {
    count_event(PERCPU_EVENT_UNTRACKED_FREE);
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

/* `table` is a constant at every call: each program holds one way only, and the _hash
 * programs no atomic instruction (which kernels before 5.12 refuse even in dead code). */
static __always_inline void count_tracked_alloc(bool table, __u64 caller, __u64 bytes, __u64 ptr) {
  if (table) {
    /* A load of the pointer's first hot slot, not used: its cache miss (the bulk of the insert's
     * cost) then overlaps the counting below instead of following it. */
    struct percpu_live_slot* early = live_slot(live_hot_home(ptr));
    if (early) (void)*(volatile __u64*)&early->ptr;
  }
  const char* task = kpath_current_task(task_comm_offset);
  count_alloc(task, caller, bytes);
  if (table) {
    bool own =
        self_tgid && task_tgid_offset && *(const __s32*)(task + task_tgid_offset) == self_tgid;
    live_table_insert(ptr, bytes, caller, own);
  } else {
    live_hash_insert(ptr, bytes, caller);
  }
}

static __always_inline void count_free(bool table, __u64 ptr) {
  if (table) {
    live_table_remove(ptr);
  } else {
    live_hash_remove(ptr);
  }
}

static __always_inline void percpu_alloc_from_tracepoint(bool table, void* ctx) {
  __u64 bytes;
  if (tp_bytes_alloc_offset) {
    bytes = kpath_tp_field(ctx, tp_bytes_alloc_offset, tp_bytes_alloc_size);
  } else {
    bytes = kpath_tp_field(ctx, tp_size_offset, tp_size_size) * nr_possible_cpus;
  }
  __u64 caller = tp_call_site_offset && !caller_from_stack_always
                     ? kpath_tp_field(ctx, tp_call_site_offset, 8)
                     : caller_from_stack(ctx);
  count_tracked_alloc(table, caller, bytes, kpath_tp_field(ctx, tp_ptr_offset, 8));
}

/* Every program that sees the pointer, for one way of tracking live allocations (`variant` is
 * the name suffix): per layout of percpu_alloc_percpu and per mechanism, and the frees. */
#define PERCPU_TRACKED_PROGRAMS(variant, table)                                    \
  PERCPU_ALLOC_PROGRAMS("tp_btf/percpu_alloc_percpu", tp_btf, variant, table)      \
  PERCPU_ALLOC_PROGRAMS("raw_tp/percpu_alloc_percpu", raw_tp, variant, table)      \
  SEC("tp/percpu/percpu_alloc_percpu")                                             \
  int percpu_alloc_tracepoint##variant(void* ctx) {                                \
    percpu_alloc_from_tracepoint(table, ctx);                                      \
    return 0;                                                                      \
  }                                                                                \
  SEC("tp_btf/percpu_free_percpu")                                                 \
  int BPF_PROG(percpu_free_tp_btf##variant, void* base_addr, int off, void* ptr) { \
    count_free(table, (__u64)ptr);                                                 \
    return 0;                                                                      \
  }                                                                                \
  SEC("raw_tp/percpu_free_percpu")                                                 \
  int BPF_PROG(percpu_free_raw_tp##variant, void* base_addr, int off, void* ptr) { \
    count_free(table, (__u64)ptr);                                                 \
    return 0;                                                                      \
  }                                                                                \
  SEC("tp/percpu/percpu_free_percpu")                                              \
  int percpu_free_tracepoint##variant(void* ctx) {                                 \
    count_free(table, kpath_tp_field(ctx, tp_free_ptr_offset, 8));                 \
    return 0;                                                                      \
  }

/* One allocation program per layout. */
#define PERCPU_ALLOC_PROGRAMS(sec, suffix, variant, table)                                         \
  SEC(sec)                                                                                         \
  int BPF_PROG(percpu_alloc_##suffix##variant, unsigned long call_site, bool reserved,             \
               bool is_atomic, size_t size, size_t align, void* base_addr, int off, void* ptr,     \
               size_t bytes_alloc) {                                                               \
    __u64 caller = caller_from_stack_always ? caller_from_stack(ctx) : call_site;                  \
    count_tracked_alloc(table, caller, bytes_alloc, (__u64)ptr);                                   \
    return 0;                                                                                      \
  }                                                                                                \
  SEC(sec)                                                                                         \
  int BPF_PROG(percpu_alloc_##suffix##_legacy##variant, bool reserved, bool is_atomic,             \
               size_t size, size_t align, void* base_addr, int off, void* ptr) {                   \
    count_tracked_alloc(table, caller_from_stack(ctx), (__u64)size* nr_possible_cpus, (__u64)ptr); \
    return 0;                                                                                      \
  }

PERCPU_TRACKED_PROGRAMS(, true)
PERCPU_TRACKED_PROGRAMS(_hash, false)

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
