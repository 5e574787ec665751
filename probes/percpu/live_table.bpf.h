/* The live-allocation table (layout and states: live_table.h): its maps and the lock-free insert
 * and removal the percpu programs call. Include after kpath_bpf.h. Tested directly through
 * BPF_PROG_TEST_RUN by tests/bpf/live_table_test.{bpf.c,cpp}. */
#ifndef KPATH_PERCPU_LIVE_TABLE_BPF_H
#define KPATH_PERCPU_LIVE_TABLE_BPF_H

#include "live_table.h"

/* log2 of the spill part's slots, set by user space between open and load (0: table unused). */
KPATH_TUNABLE(__u32, live_table_bits, 17);

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, PERCPU_LIVE_HOT_SLOTS + (1 << 17));
  __type(key, __u32);
  __type(value, struct percpu_live_slot);
} live_table SEC(".maps");

/* The callers of live allocations, for the table's slots (and live_balance) to name them by a
 * small index; user space reads it in place. Never emptied: callers are kernel functions, a few
 * hundred at most (or stack ids, without call_site). */
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
  __u32 home = PERCPU_LIVE_CALLER_HOME(caller);
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

#define LIVE_HOT(p) 0, PERCPU_LIVE_HOT_HOME(p), PERCPU_LIVE_HOT_SLOTS - 1, PERCPU_LIVE_HOT_PROBES
#define LIVE_SPILL(p)                                                                             \
  PERCPU_LIVE_HOT_SLOTS, PERCPU_LIVE_SPILL_HOME(p, live_table_bits), (1U << live_table_bits) - 1, \
      PERCPU_LIVE_PROBES

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

/* The first step of moving a hot slot's pointer to the spill part: marks it moving and returns
 * it, its info in *info; 0 if the slot holds no settled pointer with its info complete (arm64
 * may show the pointer before the info) or another CPU changed the slot meanwhile. */
static __always_inline __u64 live_move_start(struct percpu_live_slot* slot, __u64* info) {
  __u64 victim = slot->ptr;
  *info = slot->info;
  if (!PERCPU_LIVE_IS_SETTLED(victim) || !PERCPU_LIVE_INFO_VALID(victim, *info)) return 0;
  if (__sync_val_compare_and_swap(&slot->ptr, victim, victim | PERCPU_LIVE_MOVING) != victim) {
    return 0;
  }
  return victim;
}

/* The second step: copies `victim` to the spill part and gives its hot slot to `ptr`. A free
 * of `victim` may come between the steps and take the slot (as moving): the copy then goes too,
 * and `ptr` takes a free hot slot if there is one. False if `ptr` found no slot. */
static __always_inline bool live_move_finish(struct percpu_live_slot* slot, __u64 victim,
                                             __u64 victim_info, __u64 ptr, __u64 info) {
  __u64 moving = victim | PERCPU_LIVE_MOVING;
  if (!live_spill(victim, victim_info)) {
    /* No room: the victim stays, unless it was freed meanwhile, which frees its slot. */
    if (__sync_val_compare_and_swap(&slot->ptr, moving, victim) == moving) return false;
    return live_claim(LIVE_HOT(ptr), ptr, info);
  }
  if (__sync_val_compare_and_swap(&slot->ptr, moving, ptr | PERCPU_LIVE_FILLING) == moving) {
    slot->info = info;
    slot->ptr = ptr;
    return true;
  }
  live_unspill(victim);
  return live_claim(LIVE_HOT(ptr), ptr, info);
}

/* Moves the pointer in hot slot `index` to the spill part and gives the slot to `ptr`. False if
 * that pointer is not settled or neither found room. */
static __always_inline bool live_evict(__u32 index, __u64 ptr, __u64 info) {
  struct percpu_live_slot* slot = live_slot(index);
  if (!slot) return false;
  __u64 victim_info = 0;
  __u64 victim = live_move_start(slot, &victim_info);
  return victim && live_move_finish(slot, victim, victim_info, ptr, info);
}

/* Into the hot part, keeping each pointer in the first cache line of its slots where possible:
 * a free slot there; else, if the oldest pointer there is from an earlier interval, its slot;
 * else a free slot in the second line; else the oldest pointer's slot in both. Long-lived
 * pointers so leave the lines that churn uses, and frees mostly look at one line. */
static __always_inline bool live_hot_insert(__u64 ptr, __u64 info, __u32 epoch) {
  __u32 home = PERCPU_LIVE_HOT_HOME(ptr);
  const __u32 line = PERCPU_LIVE_HOT_PROBES / 2;
  if (live_claim(0, home, PERCPU_LIVE_HOT_SLOTS - 1, line, ptr, info)) return true;
  __u32 age = 0;
  int oldest = live_oldest(home, line, epoch, &age);
  if (oldest >= 0 && age > 0 && live_evict((__u32)oldest, ptr, info)) return true;
  if (live_claim(0, home + line, PERCPU_LIVE_HOT_SLOTS - 1, line, ptr, info)) return true;
  oldest = live_oldest(home, PERCPU_LIVE_HOT_PROBES, epoch, &age);
  return oldest >= 0 && live_evict((__u32)oldest, ptr, info);
}

static __always_inline __u32 live_table_epoch(void) {
  __u32 zero = 0;
  __u32* now = bpf_map_lookup_elem(&live_epoch, &zero);
  return now ? *now : 0;
}

/* Tracks an allocation (`long_lived` ones go straight to the spill part) and counts its bytes in
 * live_balance. False if the table had no room for it: its free will not be matched. A value
 * that is not a percpu pointer (NULL) has nothing to track. */
static __always_inline bool live_table_insert(__u64 ptr, __u64 bytes, __u64 caller,
                                              bool long_lived) {
  if (!PERCPU_LIVE_IS_SETTLED(ptr)) return true;
  int caller_index = live_caller_index(caller);
  if (caller_index < 0) return false;
  __u32 epoch = live_table_epoch();
  __u64 info = PERCPU_LIVE_INFO(ptr, bytes, (__u64)caller_index, epoch);
  if ((long_lived || !live_hot_insert(ptr, info, epoch)) && !live_spill(ptr, info)) return false;
  live_balance_add(info, false);
  return true;
}

/* A load of the pointer's first hot slot, not used: its cache miss (the bulk of an insert's cost)
 * then overlaps the caller's other work instead of following it. */
static __always_inline void live_table_prefetch(__u64 ptr) {
  struct percpu_live_slot* early = live_slot(PERCPU_LIVE_HOT_HOME(ptr));
  if (early) (void)*(volatile __u64*)&early->ptr;
}

/* Forgets a freed pointer and counts its bytes as freed; false if it was not tracked.
 * A pointer is freed only after its allocation's tracepoint returned, and allocated again only
 * after its free's tracepoint returned (it runs under pcpu_lock): per pointer, inserts and
 * removals never overlap, and a live pointer is in the table once (twice, briefly, while it
 * moves: the hot slot, marked moving, is the one a free takes). */
static __always_inline bool live_table_remove(__u64 ptr) {
  __u64 info = live_release(LIVE_HOT(ptr), ptr);
  if (!info) {
    __s64* spilled = live_spilled_count();
    if (!spilled) return false;
#if defined(__TARGET_ARCH_x86)
    __s64 in_spill = *spilled; /* loads are not reordered on x86 */
#else
    /* A full barrier: the count is read after the hot slot that showed the pointer gone. */
    __s64 in_spill = __sync_fetch_and_add(spilled, 0);
#endif
    if (in_spill > 0) info = live_unspill(ptr);
  }
  if (!info) return false;
  live_balance_add(info, true);
  return true;
}

#endif
