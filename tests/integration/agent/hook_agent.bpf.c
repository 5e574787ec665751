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

/* Runs per program, for the agent's own log (the inventory reads the kernel's statistics). */
__u64 runs[5];

SEC("tp/sched/sched_switch")
int agent_tp_switch(void* ctx) {
  __sync_fetch_and_add(&runs[0], 1);
  return 0;
}

SEC("raw_tp/task_newtask")
int agent_raw_newtask(void* ctx) {
  __sync_fetch_and_add(&runs[1], 1);
  return 0;
}

SEC("tp_btf/sched_process_fork")
int agent_btf_fork(void* ctx) {
  __sync_fetch_and_add(&runs[2], 1);
  return 0;
}

/* Attached by user space to a tracefs uprobe event through perf_event_open, as agents do on
 * kernels without the uprobe perf event source (and libbpf's legacy mode). */
SEC("uprobe")
int agent_uprobe(struct pt_regs* ctx) {
  __sync_fetch_and_add(&runs[3], 1);
  return 0;
}

/* Seed 002's hook: a BPF kprobe on a hot kernel function (--kprobe FUNCTION), attached through
 * the kprobe perf event source as libbpf does. Loaded only when asked for. */
SEC("kprobe")
int agent_kprobe(struct pt_regs* ctx) {
  __sync_fetch_and_add(&runs[4], 1);
  return 0;
}
