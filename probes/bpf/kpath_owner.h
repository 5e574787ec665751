/* What the `owner` field of a BPF key holds when series carry pod labels
 * (probes/cgroups/kubernetes_pods.h): set by user space through a tunable of each object, read by
 * kpath_current_owner (kpath_bpf.h). Shared by BPF programs and user space: fixed-width types
 * only. */
#ifndef KPATH_OWNER_H
#define KPATH_OWNER_H

enum kpath_owner_kind {
  KPATH_OWNER_NONE = 0,  /* no pod labels: owner 0 */
  KPATH_OWNER_CGROUP_ID, /* the task's cgroup v2 id, bpf_get_current_cgroup_id(): Linux 4.18+ */
  KPATH_OWNER_TGID,      /* the task's process id, resolved through /proc/PID/cgroup */
};

#endif
