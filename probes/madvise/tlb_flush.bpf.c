// SPDX-License-Identifier: GPL-2.0
/* TLB flushes by reason, from the x86 tlb:tlb_flush tracepoint (reason, pages). One program per
 * mechanism; user space enables exactly one. No CO-RE: the raw_tp and tracepoint programs load
 * without BTF. */
#include "tlb_flush.h"

#include "kpath_bpf.h"

char LICENSE[] SEC("license") = "GPL";

KPATH_TUNABLE(__u32, tp_reason_offset, 0); /* classic tracepoint: from the format file */
KPATH_TUNABLE(__u32, tp_reason_size, 0);

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, TLB_FLUSH_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} tlb_flushes SEC(".maps");

static __always_inline void count_flush(__u64 reason) {
  __u32 r = (__u32)reason; /* an int in the tracepoint */
  __u32 slot = r < TLB_FLUSH_SLOT_OTHER ? r : TLB_FLUSH_SLOT_OTHER;
  __u64* n = bpf_map_lookup_elem(&tlb_flushes, &slot);
  if (n) *n += 1;
}

SEC("tp_btf/tlb_flush")
int BPF_PROG(tlb_flush_tp_btf, int reason, unsigned long pages) {
  count_flush((__u64)reason);
  return 0;
}

SEC("raw_tp/tlb_flush")
int BPF_PROG(tlb_flush_raw_tp, int reason, unsigned long pages) {
  count_flush((__u64)reason);
  return 0;
}

SEC("tp/tlb/tlb_flush")
int tlb_flush_tracepoint(void* ctx) {
  count_flush(kpath_tp_field(ctx, tp_reason_offset, tp_reason_size));
  return 0;
}
