/* The allocation log (layout and ordering: allocation_log.h): its maps and the appends the percpu
 * programs with suffix _log call. Include after kpath_bpf.h. */
#ifndef KPATH_PERCPU_ALLOCATION_LOG_BPF_H
#define KPATH_PERCPU_ALLOCATION_LOG_BPF_H

#include "allocation_log.h"

/* log2 of the records per CPU in each log; the CPUs with a log (set by user space). */
KPATH_TUNABLE(__u32, log_records_bits, 12);
KPATH_TUNABLE(__u32, log_cpus, 1);

/* Sized by user space to log_cpus << log_records_bits (1 where the log is not used). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct percpu_log_alloc);
} plog_allocs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct percpu_log_free);
} plog_frees SEC(".maps");

/* Sized by user space to log_cpus. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct percpu_log_cursor);
} plog_heads SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct percpu_log_cursor);
} plog_tails SEC(".maps");

/* The order stamp: frees add one (allocation_log.h). Mmap-able so that user space reads it
 * without a system call. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} plog_order SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct percpu_log_spill_key);
  __type(value, struct percpu_log_spill_value);
} plog_spill SEC(".maps");

static __always_inline __u64* plog_order_word(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&plog_order, &zero);
}

/* Publishes a record: the count is stored after the record. x86 keeps stores in order; elsewhere
 * a fully ordered atomic (one with a result) is the barrier. */
static __always_inline void plog_publish(__u64* count, __u64 next) {
#if defined(__TARGET_ARCH_x86)
  asm volatile("" ::: "memory");
  *(volatile __u64*)count = next;
#else
  if (__sync_fetch_and_add(count, 1) != next - 1) asm volatile("" ::: "memory");
#endif
}

/* Counted in the CPU's head after the record is in the map: user space reads the map only when
 * the count moved. */
static __always_inline bool plog_spill_record(struct percpu_log_cursor* head, __u64 ptr,
                                              __u64 stamp, __u64 caller, __u64 bytes) {
  struct percpu_log_spill_key key = {.ptr = ptr, .stamp = stamp};
  struct percpu_log_spill_value value = {.caller = caller, .bytes = bytes};
  if (bpf_map_update_elem(&plog_spill, &key, &value, BPF_NOEXIST) != 0) return false;
  plog_publish(&head->spilled, head->spilled + 1);
  return true;
}

/* The stamp of an allocation (`take` false) or a free (true): the order word, or what an
 * ablation measures instead. */
static __always_inline __u64 plog_stamp(__u64* order, bool take) {
  if (KPATH_ABLATED(ORDER)) return 0;
  if (KPATH_ABLATED(CLOCK)) return bpf_ktime_get_ns();
  if (KPATH_ABLATED(JIFFIES)) return bpf_jiffies64();
  return take ? __sync_fetch_and_add(order, 1) : *(volatile __u64*)order;
}

/* Where the CPU's next record goes in its allocation log (`frees` false) or free log: its index
 * in the log map, its count to publish in *head (*n, before it); and the record's stamp. 1 if
 * there is room, 0 if the log is full (the record spills), -1 if the CPU has no log. */
static __always_inline int plog_reserve(bool frees, struct percpu_log_cursor** head, __u64* n,
                                        __u32* index, __u64* stamp) {
  __u64* order = plog_order_word();
  __u32 cpu = bpf_get_smp_processor_id();
  if (!order || cpu >= log_cpus) return -1;
  *head = bpf_map_lookup_elem(&plog_heads, &cpu);
  struct percpu_log_cursor* tail = bpf_map_lookup_elem(&plog_tails, &cpu);
  if (!*head || !tail) return -1;
  *stamp = plog_stamp(order, frees);
  *n = frees ? (*head)->frees : (*head)->allocs;
  __u64 read = frees ? *(volatile __u64*)&tail->frees : *(volatile __u64*)&tail->allocs;
  if (*n - read >= (1ULL << log_records_bits)) return 0;
  *index = (cpu << log_records_bits) | ((__u32)*n & ((1U << log_records_bits) - 1));
  return 1;
}

/* Appends an allocation; false if it is lost (log and spill map full). */
static __always_inline bool plog_append_alloc(__u64 ptr, __u64 bytes, __u64 caller) {
  if ((ptr & 3) != 0 || ptr == 0) return true; /* not a percpu pointer: nothing to match */
  struct percpu_log_cursor* head = NULL;
  __u64 n = 0, stamp = 0;
  __u32 index = 0;
  int room = plog_reserve(false, &head, &n, &index, &stamp);
  if (room <= 0) return room == 0 && plog_spill_record(head, ptr, stamp, caller, bytes);
  struct percpu_log_alloc* record = bpf_map_lookup_elem(&plog_allocs, &index);
  if (!record) return false;
  record->ptr = ptr;
  record->caller = caller;
  record->stamp_bytes = stamp << 32 | (__u32)bytes;
  plog_publish(&head->allocs, n + 1);
  return true;
}

/* Appends a free; false if it is lost. */
static __always_inline bool plog_append_free(__u64 ptr) {
  if ((ptr & 3) != 0 || ptr == 0) return true;
  struct percpu_log_cursor* head = NULL;
  __u64 n = 0, stamp = 0;
  __u32 index = 0;
  int room = plog_reserve(true, &head, &n, &index, &stamp);
  if (room <= 0) {
    return room == 0 && plog_spill_record(head, ptr, stamp | PERCPU_LOG_SPILL_FREE, 0, 0);
  }
  struct percpu_log_free* record = bpf_map_lookup_elem(&plog_frees, &index);
  if (!record) return false;
  record->ptr = ptr;
  record->stamp = stamp;
  plog_publish(&head->frees, n + 1);
  return true;
}

#endif
