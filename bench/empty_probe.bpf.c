// SPDX-License-Identifier: GPL-2.0
/* The physical limit of a hook: programs that do nothing, attached where kpathd's are, so that
 * the kernel's per-program run-time statistics give the cost of merely being called there. The
 * target is chosen at run time (bench/empty_probe.cpp).
 *
 * And what a cache line of map memory costs a program there (bench/memory_floor.py): the touch
 * programs read and write `lines` pseudo-random 64-byte lines, as a table insert does, drawn
 * from a window of an array map that user space sizes: its first `slot_mask` + 1 lines, `stride`
 * lines apart (65: each on a page of its own). The window's lines and pages tell the cost of a
 * data working set from that of address translation.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf")
int empty_tp_btf(void* ctx) { return 0; }

SEC("raw_tp")
int empty_raw_tp(void* ctx) { return 0; }

SEC("tp")
int empty_tracepoint(void* ctx) { return 0; }

const volatile __u32 lines = 1;     /* lines touched per event, at most 8 */
const volatile __u32 slot_mask = 0; /* the window's lines - 1 (a power of two) */
const volatile __u32 stride = 1;    /* lines between two of the window's: 65 puts each on a page
                                       of its own, at a line offset of its own */

struct line {
  __u64 word[8];
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct line);
} table SEC(".maps");

static __always_inline int touch(void) {
  __u64 seed = bpf_get_prandom_u32();
#pragma clang loop unroll(disable)
  for (__u32 i = 0; i < 8 && i < lines; i++) {
    seed = seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
    __u32 index = ((__u32)(seed >> 40) & slot_mask) * stride;
    struct line* l = bpf_map_lookup_elem(&table, &index);
    if (l) l->word[0] += 1;
  }
  return 0;
}

SEC("tp_btf")
int touch_tp_btf(void* ctx) { return touch(); }

SEC("raw_tp")
int touch_raw_tp(void* ctx) { return touch(); }

/* A per-CPU log instead (bench/memory_floor.py's log hooks): each event writes a 16-byte record
 * where the CPU's last one ended, four to a line, in its own region of `log_mask` + 1 lines of an
 * mmap-able array that a reader may drain; what a design that matches frees to allocations in
 * user space would pay per event. */
const volatile __u32 log_mask = 0;
const volatile __u32 log_lines_per_cpu = 1;
const volatile bool log_time = false; /* the record carries bpf_ktime_get_ns(): an order across
                                         CPUs, which matching frees to allocations needs */

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} log_position SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct line);
} event_log SEC(".maps");

static __always_inline int append(void) {
  __u32 zero = 0;
  __u64* position = bpf_map_lookup_elem(&log_position, &zero);
  if (!position) return 0;
  __u64 p = (*position)++;
  __u32 index = bpf_get_smp_processor_id() * log_lines_per_cpu + ((__u32)(p >> 2) & log_mask);
  struct line* l = bpf_map_lookup_elem(&event_log, &index);
  if (!l) return 0;
  __u32 word = ((__u32)p & 3) * 2;
  l->word[word & 7] = p;
  l->word[(word + 1) & 7] = log_time ? bpf_ktime_get_ns() : p ^ 0x5bd1e995;
  return 0;
}

SEC("tp_btf")
int log_tp_btf(void* ctx) { return append(); }
