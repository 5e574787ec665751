/* Types shared between cgroup_churn.bpf.c and the user-space probe. Fixed-width types only. */
#ifndef KPATH_CGROUP_CHURN_H
#define KPATH_CGROUP_CHURN_H

#ifndef __VMLINUX_H__ /* user space; BPF programs have the types from vmlinux.h */
#include <linux/types.h>
#endif

/* The kernel formats the tracepoint's cgroup path into a buffer of this size
 * (TRACE_CGROUP_PATH_LEN), so no path is longer. */
#define CGROUP_CHURN_PATH_MAX 1024

/* The end of the path kept in the key: the deepest components, where the systemd unit is. Keying
 * by the whole path would give every transient cgroup its own entry for nothing: user space only
 * derives the unit from the last components. */
#define CGROUP_CHURN_TAIL_LEN 124

/* cgroup mkdirs and rmdirs by process and path tail (KPATH_KEYED_COUNTERS churn_counts). */
struct cgroup_churn_key {
  char comm[16];
  char path_tail[CGROUP_CHURN_TAIL_LEN]; /* NUL-terminated */
  /* 1: the path was longer than the tail, whose first component is then cut. */
  __u32 truncated;
};

struct cgroup_churn_value {
  __u64 mkdirs;
  __u64 rmdirs;
};

/* Per-CPU scratch: the key and, for long paths, the whole path (too big for the BPF stack). */
struct cgroup_churn_scratch {
  struct cgroup_churn_key key;
  char path[CGROUP_CHURN_PATH_MAX];
};

#endif
