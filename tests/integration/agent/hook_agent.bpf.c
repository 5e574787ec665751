// SPDX-License-Identifier: GPL-2.0
/* The test-only stand-in agent's programs: one per kind of hook the foreign-hook inventory must
 * find, each counting its runs. sched:sched_switch is on kpathd's default hot list. */
/* vmlinux.h must come first: the libbpf headers use its types. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

char LICENSE[] SEC("license") = "GPL";

/* Runs per program, for the agent's own log (the inventory reads the kernel's statistics). An
 * array map, not a global: 4.19 (seed 002's kernel) has no BPF global data. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 5);
  __type(key, __u32);
  __type(value, __u64);
} runs SEC(".maps");

static __always_inline void count_run(__u32 program) {
  __u64* n = bpf_map_lookup_elem(&runs, &program);
  if (n) __sync_fetch_and_add(n, 1);
}

SEC("tp/sched/sched_switch")
int agent_tp_switch(void* ctx) {
  count_run(0);
  return 0;
}

SEC("raw_tp/task_newtask")
int agent_raw_newtask(void* ctx) {
  count_run(1);
  return 0;
}

SEC("tp_btf/sched_process_fork")
int agent_btf_fork(void* ctx) {
  count_run(2);
  return 0;
}

/* Attached by user space to a tracefs uprobe event through perf_event_open, as agents do on
 * kernels without the uprobe perf event source (and libbpf's legacy mode). */
SEC("uprobe")
int agent_uprobe(struct pt_regs* ctx) {
  count_run(3);
  return 0;
}

/* Seed 002's hook: a BPF kprobe on a hot kernel function (--kprobe FUNCTION), attached through
 * the kprobe perf event source as libbpf does. Loaded only when asked for. */
SEC("kprobe")
int agent_kprobe(struct pt_regs* ctx) {
  count_run(4);
  return 0;
}
