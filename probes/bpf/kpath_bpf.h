/* Shared by every kpathd BPF program: includes and small helpers. Kernel differences are handled
 * by choosing among programs in user space (bpf_program__set_autoload) after asking the kernel,
 * never by version checks. */
#ifndef KPATH_BPF_H
#define KPATH_BPF_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* Reads a classic-tracepoint field at an offset learnt from the event's format file at start, so
 * the same program serves every kernel's layout, with or without BTF. */
static __always_inline __u64 kpath_tp_field(void *ctx, __u32 offset, __u32 size) {
  __u64 v = 0;
  if (size > sizeof(v) || offset > 4096) return 0;
  bpf_probe_read_kernel(&v, size & 0xf, (char *)ctx + offset);
  return v;
}

#endif /* KPATH_BPF_H */
