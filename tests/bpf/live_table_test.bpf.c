// SPDX-License-Identifier: GPL-2.0
/* The percpu probe's live-allocation table (probes/percpu/live_table.bpf.h) behind programs that
 * BPF_PROG_TEST_RUN drives one step at a time (tests/bpf/live_table_test.cpp). Each program reads
 * its arguments from the raw_tp context, four words written by the test, and returns 1 or 0.
 * Never attached. */
// clang-format off
#include "kpath_bpf.h"
#include "../../probes/percpu/live_table.bpf.h"
// clang-format on

char LICENSE[] SEC("license") = "GPL";

/* The move live_move_start began, for live_move_finish to complete. */
__u32 pending_index = 0;
__u64 pending_victim = 0;
__u64 pending_info = 0;

/* (ptr, bytes, caller, long_lived): 1 if tracked, 0 where the probe counts LIVE_MAP_FULL. */
SEC("raw_tp")
int test_insert(__u64* ctx) { return live_table_insert(ctx[0], ctx[1], ctx[2], ctx[3] != 0); }

/* (ptr): 1 if it was tracked, 0 where the probe counts UNTRACKED_FREE. */
SEC("raw_tp")
int test_remove(__u64* ctx) { return live_table_remove(ctx[0]); }

/* (hot slot index): the first step of an eviction; 1 if the slot's pointer is now moving. */
SEC("raw_tp")
int test_move_start(__u64* ctx) {
  __u32 index = (__u32)ctx[0];
  struct percpu_live_slot* slot = live_slot(index);
  if (!slot) return 0;
  __u64 info = 0;
  __u64 victim = live_move_start(slot, &info);
  if (!victim) return 0;
  pending_index = index;
  pending_victim = victim;
  pending_info = info;
  return 1;
}

/* (ptr, bytes, caller): the second step, giving the slot to a new allocation as an insert
 * would; 1 if it was tracked. */
SEC("raw_tp")
int test_move_finish(__u64* ctx) {
  struct percpu_live_slot* slot = live_slot(pending_index);
  int caller_index = live_caller_index(ctx[2]);
  if (!slot || caller_index < 0) return 0;
  __u64 info = PERCPU_LIVE_INFO(ctx[0], ctx[1], (__u64)caller_index, live_table_epoch());
  if (!live_move_finish(slot, pending_victim, pending_info, ctx[0], info)) return 0;
  live_balance_add(info, false);
  return 1;
}
