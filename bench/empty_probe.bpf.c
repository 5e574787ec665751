// SPDX-License-Identifier: GPL-2.0
/* The physical limit of a hook: programs that do nothing, attached where kpathd's are, so that
 * the kernel's per-program run-time statistics give the cost of merely being called there. The
 * target is chosen at run time (bench/empty_probe.cpp). */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf")
int empty_tp_btf(void* ctx) { return 0; }

SEC("raw_tp")
int empty_raw_tp(void* ctx) { return 0; }

SEC("tp")
int empty_tracepoint(void* ctx) { return 0; }
