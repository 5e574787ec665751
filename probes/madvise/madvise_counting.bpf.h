/* The counting half of the madvise probe, shared by both of its BPF objects (madvise.bpf.c:
 * classic tracepoints and kprobes, loadable without BTF; madvise_fentry.bpf.c: fentry). Every
 * hook only finds (len, behavior) and calls madvise_count(). */
#ifndef KPATH_MADVISE_COUNTING_BPF_H
#define KPATH_MADVISE_COUNTING_BPF_H

#include "kpath_bpf.h"
#include "madvise.h"

/* Keys in one sampling interval (user space drains and empties the hash every interval). Each
 * key costs 16 bytes per possible CPU and per buffer: 1024 keys on 256 CPUs is 8 MiB. */
#define MADVISE_KEYS 1024

KPATH_KEYED_COUNTERS(madvise_counts, struct madvise_key, struct madvise_value, MADVISE_KEYS)

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, MADVISE_EVENT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} madvise_events SEC(".maps");

/* kpathd's process id (tgid), set by user space: its check call (MADVISE_SELF_CHECK_BYTES). */
KPATH_TUNABLE(__u32, madvise_self_tgid, 0);
/* enum kpath_owner_kind: what keys carry besides the comm, for the pod labels. */
KPATH_TUNABLE(__u32, madvise_owner, KPATH_OWNER_NONE);

static __always_inline void madvise_count_event(__u32 event) {
  __u64* n = bpf_map_lookup_elem(&madvise_events, &event);
  if (n) *n += 1;
}

/* madvise(2) takes an int: compare the low 32 bits, whatever the register's upper half holds. */
static __always_inline __u32 madvise_advice_of(__u64 behavior) {
  switch ((__s32)behavior) {
    case 4: /* MADV_DONTNEED */
      return MADVISE_ADVICE_DONTNEED;
    case 8: /* MADV_FREE */
      return MADVISE_ADVICE_FREE;
    case 3: /* MADV_WILLNEED */
      return MADVISE_ADVICE_WILLNEED;
    case 20: /* MADV_COLD */
      return MADVISE_ADVICE_COLD;
    case 21: /* MADV_PAGEOUT */
      return MADVISE_ADVICE_PAGEOUT;
    case 14: /* MADV_HUGEPAGE */
      return MADVISE_ADVICE_HUGEPAGE;
    case 15: /* MADV_NOHUGEPAGE */
      return MADVISE_ADVICE_NOHUGEPAGE;
    case 25: /* MADV_COLLAPSE */
      return MADVISE_ADVICE_COLLAPSE;
    default:
      return MADVISE_ADVICE_OTHER;
  }
}

/* The key's slot in the active buffer: its own, else (hash full) the reserved overflow key of
 * its advice, else the buffer's overflow slot. One branch per buffer: the verifier needs a
 * constant map at each call. */
#define MADVISE_SLOT_IN(map)                                    \
  ({                                                            \
    struct madvise_value* v_ = bpf_map_lookup_elem(&map, key);  \
    if (!v_) {                                                  \
      bpf_map_update_elem(&map, key, &zero_value, BPF_NOEXIST); \
      v_ = bpf_map_lookup_elem(&map, key);                      \
    }                                                           \
    if (!v_) {                                                  \
      __builtin_memset(key->comm, 0, sizeof(key->comm));        \
      key->owner = 0;                                           \
      v_ = bpf_map_lookup_elem(&map, key);                      \
    }                                                           \
    v_;                                                         \
  })

static __always_inline struct madvise_value* madvise_slot(struct madvise_key* key) {
  struct madvise_value zero_value = {};
  __u32 zero = 0;
  __u32* active = bpf_map_lookup_elem(&madvise_counts_active, &zero);
  __u32 buffer = (active && *active) ? 1 : 0;
  struct madvise_value* v;
  if (buffer) {
    v = MADVISE_SLOT_IN(madvise_counts_1);
  } else {
    v = MADVISE_SLOT_IN(madvise_counts_0);
  }
  if (v) return v;
  return bpf_map_lookup_elem(&madvise_counts_overflow, &buffer);
}

/* One call of `bytes` by the task whose comm is already in `key`. */
static __always_inline void madvise_count_key(struct madvise_key* key, __u64 behavior,
                                              __u64 bytes) {
  /* kpathd's check that this hook sees madvise(2): an event, not a call (compared in this order,
   * so that other calls pay one comparison). */
  if (bytes == MADVISE_SELF_CHECK_BYTES && (__u32)behavior == 0 &&
      (bpf_get_current_pid_tgid() >> 32) == madvise_self_tgid) {
    madvise_count_event(MADVISE_EVENT_SELF_CHECK);
    return;
  }
  key->advice = madvise_advice_of(behavior);
  key->reserved = 0;
  key->owner = kpath_current_owner(madvise_owner);
  struct madvise_value* v = madvise_slot(key);
  if (!v) return;
  v->calls += 1;
  v->bytes += bytes;
}

/* One madvise call (or one process_madvise call) of `bytes` by the current task. */
static __always_inline void madvise_count(__u64 behavior, __u64 bytes) {
  struct madvise_key key;
  __builtin_memset(&key, 0, sizeof(key));
  /* The task's own comm: what `ps -L` and `top -H` show for the thread. */
  bpf_get_current_comm(key.comm, sizeof(key.comm));
  madvise_count_key(&key, behavior, bytes);
}

/* A user-space struct iovec, declared here without CO-RE: it is ABI, the same on every kernel. */
struct madvise_user_iovec {
  __u64 base;
  __u64 len;
};

/* One process_madvise call: counted once, its bytes the sum of its iovec lengths. */
static __always_inline void process_madvise_count(__u64 vec, __u64 vlen, __u64 behavior) {
  const struct madvise_user_iovec* iov = (const struct madvise_user_iovec*)vec;
  __u64 bytes = 0;
  /* More than UIO_MAXIOV iovecs is EINVAL: the call is counted with no bytes. */
  if (vlen <= MADVISE_MAX_IOVECS) {
    for (__u32 i = 0; i < MADVISE_MAX_IOVECS; i++) {
      if (i >= vlen) break;
      __u64 len = 0;
      if (bpf_probe_read_user(&len, sizeof(len), &iov[i].len) != 0) {
        madvise_count_event(MADVISE_EVENT_IOVEC_READ_ERROR);
        break;
      }
      bytes += len;
    }
  }
  madvise_count(behavior, bytes);
}

#endif /* KPATH_MADVISE_COUNTING_BPF_H */
