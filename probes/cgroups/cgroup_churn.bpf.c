// SPDX-License-Identifier: GPL-2.0
/* cgroup churn (seed 000): every cgroup mkdir and rmdir, counted by process and path tail. One
 * pair of programs (mkdir, rmdir) per way to hook the cgroup:cgroup_mkdir/cgroup_rmdir
 * tracepoints; user space enables exactly one pair after asking the kernel.
 *
 * Both tracepoints pass (struct cgroup *cgrp, const char *path) since Linux 4.19; the path is
 * relative to the hierarchy's root ("/system.slice/foo.service"). The programs read nothing
 * through CO-RE, so the object also loads on kernels without BTF (raw_tp, tracepoint). */
/* kpath_bpf.h first: its vmlinux.h defines the types cgroup_churn.h uses. */
// clang-format off
#include "kpath_bpf.h"
#include "cgroup_churn.h"
// clang-format on

char LICENSE[] SEC("license") = "GPL";

/* Classic tracepoints: offsets of the `__data_loc char[] path` fields, from the format files. */
const volatile __u32 tp_mkdir_path_offset = 0;
const volatile __u32 tp_rmdir_path_offset = 0;

/* 1024 keys per interval: the hash is drained every sampling interval, and only distinct
 * (process, path tail) pairs take an entry; more spill into the overflow slot ("other"). */
KPATH_KEYED_COUNTERS(churn_counts, struct cgroup_churn_key, struct cgroup_churn_value, 1024)

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct cgroup_churn_scratch);
} scratch SEC(".maps");

/* Bounded work: at most three string reads, one hash lookup (and insert). */
static __always_inline void count_cgroup_event(const char* path, bool rmdir) {
  __u32 zero = 0;
  struct cgroup_churn_scratch* s = bpf_map_lookup_elem(&scratch, &zero);
  if (!s) return;
  struct cgroup_churn_key* key = &s->key;
  __builtin_memset(key, 0, sizeof(*key)); /* the hash compares every byte of the key */
  bpf_get_current_comm(key->comm, sizeof(key->comm));
  long n = bpf_probe_read_kernel_str(key->path_tail, sizeof(key->path_tail), path);
  if (n == sizeof(key->path_tail)) {
    /* Filled the tail: the path may be longer. Learn its length, keep its end. */
    long len = bpf_probe_read_kernel_str(s->path, sizeof(s->path), path);
    if (len > (long)sizeof(key->path_tail) && len <= (long)sizeof(s->path)) {
      bpf_probe_read_kernel_str(key->path_tail, sizeof(key->path_tail),
                                path + (len - sizeof(key->path_tail)));
      key->truncated = 1;
    }
  }
  struct cgroup_churn_value* v = churn_counts_slot(key);
  if (!v) return;
  if (rmdir) {
    v->rmdirs += 1;
  } else {
    v->mkdirs += 1;
  }
}

SEC("tp_btf/cgroup_mkdir")
int BPF_PROG(cgroup_mkdir_tp_btf, struct cgroup* cgrp, const char* path) {
  count_cgroup_event(path, false);
  return 0;
}

SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(cgroup_rmdir_tp_btf, struct cgroup* cgrp, const char* path) {
  count_cgroup_event(path, true);
  return 0;
}

SEC("raw_tp/cgroup_mkdir")
int BPF_PROG(cgroup_mkdir_raw_tp, struct cgroup* cgrp, const char* path) {
  count_cgroup_event(path, false);
  return 0;
}

SEC("raw_tp/cgroup_rmdir")
int BPF_PROG(cgroup_rmdir_raw_tp, struct cgroup* cgrp, const char* path) {
  count_cgroup_event(path, true);
  return 0;
}

/* A __data_loc field holds the string's offset from the record start (low 16 bits) and its
 * length (high 16 bits). */
static __always_inline const char* tp_data_loc_string(void* ctx, __u32 field_offset) {
  __u32 loc = (__u32)kpath_tp_field(ctx, field_offset, sizeof(__u32));
  return (const char*)ctx + (loc & 0xffff);
}

SEC("tp/cgroup/cgroup_mkdir")
int cgroup_mkdir_tracepoint(void* ctx) {
  count_cgroup_event(tp_data_loc_string(ctx, tp_mkdir_path_offset), false);
  return 0;
}

SEC("tp/cgroup/cgroup_rmdir")
int cgroup_rmdir_tracepoint(void* ctx) {
  count_cgroup_event(tp_data_loc_string(ctx, tp_rmdir_path_offset), true);
  return 0;
}
