/* The layout of the percpu probe's live-allocation table, shared by its BPF side
 * (live_table.bpf.h) and user space. Fixed-width types only. */
#ifndef KPATH_PERCPU_LIVE_TABLE_H
#define KPATH_PERCPU_LIVE_TABLE_H

/* `live_table` holds the percpu pointer, size and caller of every live allocation (kernels with
 * BPF atomics, Linux 5.12+). An array map of open-addressing slots in two parts:
 *  - the hot part, the first PERCPU_LIVE_HOT_SLOTS slots, where a pointer is put and looked for
 *    first, in PERCPU_LIVE_HOT_PROBES slots from PERCPU_LIVE_HOT_HOME (one or two cache lines).
 *    Small, so that the slots churn uses stay in the CPU caches, and large enough for kpathd's own
 *    start and a burst of memcg churn (the figures: bench/README.md, "The percpu live table").
 *  - the spill part, 2^live_table_bits slots sized from percpu.max_tracked_allocations, probed
 *    PERCPU_LIVE_PROBES slots from PERCPU_LIVE_SPILL_HOME. When a pointer's hot slots are all
 *    taken, the oldest pointer among them (by the interval it was allocated in, `live_epoch`)
 *    moves here and the new one takes its place: the hot part keeps the latest allocations, the
 *    ones freed soon (churn), and long-lived ones (and leaks) drift to the spill part.
 * Slots change state with compare-and-swap on `ptr`, so programs on all CPUs share the table
 * without locks. Percpu pointers are multiples of 4: the values below and the two low bits never
 * collide with one. A pointer is claimed as ptr|FILLING, `info` written, then `ptr` stored
 * (settled); a move marks it ptr|MOVING until its copy is in the spill part (a move checks the
 * check bits, so that it never copies an info still being written). A free takes a settled or
 * moving pointer and adds the size in its info to `live_balance` (per CPU, by caller index),
 * where each tracked allocation added it too: user space sums allocated - freed over CPUs, the
 * outstanding bytes by caller, without reading the table.
 * 16 bytes a slot: the caller is an index into `live_callers` (PERCPU_LIVE_CALLERS words, the
 * distinct callers seen; 0 stands for "unknown"), and a percpu allocation is at most 32 KiB per
 * CPU (PCPU_MIN_UNIT_SIZE), so its bytes over all CPUs fit 32 bits. */
#define PERCPU_LIVE_EMPTY 0      /* never used: ends a probe sequence */
#define PERCPU_LIVE_FREED 1      /* a tombstone: free for reuse, and probing goes on past it */
#define PERCPU_LIVE_FILLING 1ULL /* low bits of `ptr`: claimed, `info` being written */
#define PERCPU_LIVE_MOVING 2ULL  /* low bits of `ptr`: being copied to the spill part */
#define PERCPU_LIVE_IS_FREE(ptr) ((ptr) <= PERCPU_LIVE_FREED)
#define PERCPU_LIVE_IS_SETTLED(ptr) ((ptr) > PERCPU_LIVE_FREED && ((ptr)&3) == 0)
#define PERCPU_LIVE_HOT_BITS 13
#define PERCPU_LIVE_HOT_SLOTS (1 << PERCPU_LIVE_HOT_BITS)
#define PERCPU_LIVE_HOT_PROBES 8
#define PERCPU_LIVE_PROBES 32
#define PERCPU_LIVE_CALLER_BITS 11
#define PERCPU_LIVE_CALLERS (1 << PERCPU_LIVE_CALLER_BITS)
/* The first slot to probe for a pointer in each part (the spill part has 2^bits slots): the top
 * bits of multiplicative hashes. The hot one starts a 64-byte line: its first four probes are one
 * cache miss. The first slot for a caller in live_callers likewise. */
#define PERCPU_LIVE_HOT_HOME(ptr) \
  ((__u32)(((ptr)*0x9e3779b97f4a7c15ULL) >> (64 - PERCPU_LIVE_HOT_BITS)) & ~3U)
#define PERCPU_LIVE_SPILL_HOME(ptr, bits) \
  ((__u32)((((ptr) ^ ((ptr) >> 29)) * 0xff51afd7ed558ccdULL) >> (64 - (bits))))
#define PERCPU_LIVE_CALLER_HOME(caller) \
  ((__u32)(((caller)*0x9e3779b97f4a7c15ULL) >> (64 - PERCPU_LIVE_CALLER_BITS)))
/* info = bytes (bits 0-31) | caller index (32-43) | epoch mod 256 (44-51) | check (52-63), the
 * check bits a hash of the pointer and the rest. */
#define PERCPU_LIVE_INFO_CHECK(ptr, rest) ((((ptr) ^ (rest)) * 0x9e3779b97f4a7c15ULL) >> 52)
#define PERCPU_LIVE_INFO_REST(bytes, caller_index, epoch) \
  ((__u64)(__u32)(bytes) | ((__u64)(caller_index)&0xfff) << 32 | ((__u64)(epoch)&0xff) << 44)
#define PERCPU_LIVE_INFO(ptr, bytes, caller_index, epoch) \
  (PERCPU_LIVE_INFO_REST(bytes, caller_index, epoch) |    \
   PERCPU_LIVE_INFO_CHECK(ptr, PERCPU_LIVE_INFO_REST(bytes, caller_index, epoch)) << 52)
#define PERCPU_LIVE_INFO_VALID(ptr, info) \
  (((info) >> 52) == PERCPU_LIVE_INFO_CHECK(ptr, (info)&0xfffffffffffffULL))
#define PERCPU_LIVE_INFO_BYTES(info) ((info)&0xffffffffULL)
#define PERCPU_LIVE_INFO_CALLER(info) (((info) >> 32) & 0xfff)
#define PERCPU_LIVE_INFO_EPOCH(info) (((info) >> 44) & 0xff)
struct percpu_live_slot {
  __u64 ptr;
  __u64 info;
};

/* Per caller: bytes of tracked allocations and of their frees. Outstanding = allocated - freed.
 * With the table: `live_balance`, by caller index; with the hash map `live_allocs`:
 * KPATH_KEYED_COUNTERS caller_balance, keyed by the caller word. */
struct percpu_balance_value {
  __u64 allocated_bytes;
  __u64 freed_bytes;
};

/* `live_balance` is a per-CPU array of one element (32 KiB): one pointer to follow, not one per
 * caller. */
struct percpu_live_balance {
  struct percpu_balance_value callers[PERCPU_LIVE_CALLERS];
};

#endif
