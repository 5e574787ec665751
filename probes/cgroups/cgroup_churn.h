/* Types shared between cgroup_churn.bpf.c and the user-space probe. Fixed-width types only. */
#ifndef KPATH_CGROUP_CHURN_H
#define KPATH_CGROUP_CHURN_H

#ifndef __VMLINUX_H__ /* user space; BPF programs have the types from vmlinux.h */
#include <linux/types.h>
#endif

/* The kernel formats the tracepoint's cgroup path into a buffer of this size
 * (TRACE_CGROUP_PATH_LEN), so no path is longer. */
#define CGROUP_CHURN_PATH_MAX 1024

/* The end of the path user space gets: the deepest components, where the systemd unit is, up to
 * 127 bytes and a NUL. Keying by the whole path would give every transient cgroup its own entry
 * for nothing: user space only derives the unit from the last components. */
#define CGROUP_CHURN_TAIL_LEN 128

/* cgroup mkdirs and rmdirs by process and path (KPATH_CACHED_KEYED_COUNTERS churn_counts). The
 * path is keyed by 64 bits that the BPF programs find cheaply, so that a key of 24 bytes, not
 * the path, is hashed and compared on every event:
 *  - tp_btf, where vmlinux BTF has the fields: the parent cgroup's serial number and the kernfs
 *    hash of the cgroup's name, read straight from the cgroup (no string is read);
 *  - otherwise a hash of the path tail's bytes (and of `truncated`).
 * The path tail itself goes to user space in churn_paths_<buffer>, keyed by path_key, whenever
 * its key takes a counter in that buffer (once per CPU and interval). */
struct cgroup_churn_key {
  char comm[16];
  __u64 path_key;
};

struct cgroup_churn_value {
  __u64 mkdirs;
  __u64 rmdirs;
};

/* The path tail behind a path_key (churn_paths_0 and churn_paths_1, keyed by path_key). */
struct cgroup_churn_path {
  char tail[CGROUP_CHURN_TAIL_LEN]; /* NUL-terminated, zero-padded */
  /* 1: the path was longer than the tail, whose first component is then cut. */
  __u32 truncated;
  /* The cgroup's hierarchy (cgroup_root.hierarchy_id: 0 is the unified v2 hierarchy, v1
   * hierarchies count from 1), or CGROUP_CHURN_HIERARCHY_UNKNOWN. On cgroup v1 one unit start
   * makes the same path in several hierarchies: user space counts it once (the most made in any
   * one hierarchy). The key holds the hierarchy too, so these never share a counter. */
  __u32 hierarchy;
  /* The key of the name's shape (CGROUP_CHURN_SHAPE_BIT set), or 0: see churn_shapes. */
  __u64 shape_key;
};

#define CGROUP_CHURN_HIERARCHY_UNKNOWN 0xffffffffu

/* Names with digits, keyed by their shape. Transient units bring a new name per cgroup
 * (run-u123.scope, session-5.scope): each would take a counter and send its tail, a hash insert
 * and a string copy per event. A name's shape is its parent (tp_btf: the parent's serial number,
 * names under 64 bytes; raw_tp and tracepoint: the path up to the name, as path tails are read),
 * its hierarchy and its bytes with every ASCII digit replaced by '#'. User
 * space, given one name of a shape with its path tail, checks that the unit it derives does not
 * depend on the digits (run-u123.scope and run-u9999.scope -> run-*.scope, but user@1000.service
 * and php8.2-fpm.service keep theirs) and then writes the shape's key into churn_shapes, slot
 * key & (CGROUP_CHURN_SHAPE_SLOTS - 1). A name whose shape is there is counted under the
 * shape's key, a key of few values: the per-CPU cache keeps it, and no tail is sent. Shape keys
 * have CGROUP_CHURN_SHAPE_BIT set, path keys never. */
#define CGROUP_CHURN_SHAPE_BIT (1ULL << 63)
#define CGROUP_CHURN_SHAPE_SLOTS 1024

/* Per-CPU scratch (too big for the BPF stack): the path's first bytes (or its tail), the record
 * sent to user space, and, for long paths, the whole path. */
struct cgroup_churn_scratch {
  __u64 words[CGROUP_CHURN_TAIL_LEN / 8];
  struct cgroup_churn_path path;
  char full[CGROUP_CHURN_PATH_MAX];
};

#endif
