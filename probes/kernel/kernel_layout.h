// Every struct member offset and tracepoint layout kpathd relies on, asked of the running kernel
// once (vmlinux BTF, tracefs formats) and kept: kpathd's counterpart of bcc's core_fixes.bpf.h.
// kpathd's BPF objects carry no CO-RE relocations (they must load on kernels without BTF), so
// where BPF reads a kernel struct, user space hands it the offset through .rodata. Each entry
// names the kernel change that made kpathd need it. Never keyed on a kernel version number.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

namespace kpath {

class KernelFeatures;

// task_struct, read by every probe that names the task (percpu, cgroup_churn, madvise, irqoff).
// Its layout depends on the configuration (CONFIG_* members) and, since commit 29e48ce87f1e
// ("task_struct: Allow randomized layout", v4.13, then under CONFIG_GCC_PLUGIN_RANDSTRUCT; named
// CONFIG_RANDSTRUCT since v5.19 when clang gained it), on a per-build seed: no offset can be
// compiled in.
struct TaskStructLayout {
  std::optional<uint32_t> comm;  // char comm[16]
  std::optional<uint32_t> pid;
  std::optional<uint32_t> tgid;
};

// What cgroup_churn reads from the `struct cgroup *` of the cgroup_mkdir/rmdir tracepoints on
// tp_btf: the cgroup's kernfs name hash and its parent's serial number. The cgroup tracepoints
// (include/trace/events/cgroup.h, v4.13) pass the cgroup itself; struct cgroup embeds `self` (a
// cgroup_subsys_state) whose members vary with the configuration (lockdep, percpu_ref), so the
// parent pointer's place does too.
struct CgroupLayout {
  std::optional<uint32_t> cgroup_kn;         // cgroup.kn
  std::optional<uint32_t> kernfs_node_hash;  // kernfs_node.hash
  std::optional<uint32_t> kernfs_node_name;  // kernfs_node.name (the name's shape)
  std::optional<uint32_t> cgroup_parent;     // cgroup.self + cgroup_subsys_state.parent
  std::optional<uint32_t> css_serial_nr;     // cgroup_subsys_state.serial_nr
  // The hierarchy (cgroup v1 mounts one per controller set; 0 is the unified v2 one).
  std::optional<uint32_t> cgroup_root;        // cgroup.root
  std::optional<uint32_t> root_hierarchy_id;  // cgroup_root.hierarchy_id
  bool has_hierarchy() const { return cgroup_root && root_hierarchy_id; }
  bool complete() const { return cgroup_kn && kernfs_node_hash && cgroup_parent && css_serial_nr; }
};

// percpu:percpu_alloc_percpu. Commit f67bed134a05 ("percpu: improve percpu_alloc_percpu event
// trace", v6.0) added call_site, bytes_alloc and gfp_flags: 10 arguments instead of 7.
enum class PercpuAllocLayout {
  kUnknown,         // neither BTF nor the tracefs format tells
  kWithBytesAlloc,  // v6.0+: call_site, ..., bytes_alloc, gfp_flags
  kLegacy,          // reserved, is_atomic, size, align, base_addr, off, ptr
};

// The argument counts of the tracepoints whose tp_btf/raw_tp programs read arguments by position,
// from their BTF prototypes (btf_trace_<event>, without the leading `void *__data`): nullopt when
// there is no vmlinux BTF or the event is not in it.
struct TracepointArity {
  // cgroup:cgroup_mkdir and cgroup_rmdir. Added in v4.13 with the cgroup as their only argument
  // (the event computed the path itself, taking a spin lock inside the tracepoint); by v4.19 the
  // caller computes the path first and passes it: (struct cgroup *cgrp, const char *path).
  std::optional<int> cgroup_mkdir;
  std::optional<int> cgroup_rmdir;
  // sched:sched_switch. (prev, next) until commit c73464b1c843 ("sched/core: Fix
  // trace_sched_switch()", v4.4) put `bool preempt` first; commit fa2c3254d7cf ("sched/tracing:
  // Don't re-read p->state when emitting sched_switch event", v5.18) appended prev_state. From 3
  // arguments on, prev is the second.
  std::optional<int> sched_switch;
  // tlb:tlb_flush (x86 only): (int reason, unsigned long pages) from v4.4 (the oldest kernel
  // checked) to today's mainline; another count would be a change the BPF side does not know.
  std::optional<int> tlb_flush;
  // percpu:percpu_alloc_percpu (arity varies: PercpuAllocLayout) and percpu_free_percpu. Kernels
  // without them in BTF lack the tracepoints (added in v4.12) or BTF.
  std::optional<int> percpu_alloc_percpu;
  std::optional<int> percpu_free_percpu;

  static bool CgroupHasPath(std::optional<int> args) { return args && *args >= 2; }
  bool SchedSwitchHasPrev() const { return sched_switch && *sched_switch >= 3; }
};

// Another CPU's per-CPU data, for the IRQ-off detector's witnesses (probes/irqoff/irqoff.h).
// BPF finds a CPU's per-CPU area from its run queue, current->se.cfs_rq->rq, which is that CPU's
// `runqueues` (the cfs_rq's `rq` exists with CONFIG_FAIR_GROUP_SCHED); the variables' places in
// the per-CPU section are in vmlinux BTF's `.data..percpu` (pahole 1.18+).
struct PercpuLayout {
  std::optional<uint32_t> task_cfs_rq;  // task_struct.se + sched_entity.cfs_rq
  std::optional<uint32_t> cfs_rq_rq;    // cfs_rq.rq
  std::optional<uint32_t> runqueues;    // the per-CPU variable `runqueues`
  // x86's per-CPU preempt count: `__preempt_count`, inside `pcpu_hot` from commit 64701838bf05
  // ("x86/percpu: Move preempt_count next to current_task", v6.2) until v6.15 dismantled
  // pcpu_hot. Other architectures keep it in thread_info: not read (nullopt).
  std::optional<uint32_t> preempt_count;
  // preempt_disable() counts only with CONFIG_PREEMPT_COUNT, which CONFIG_PREEMPTION (the
  // preempt_schedule function) implies; PREEMPT_VOLUNTARY kernels before v5.12's
  // PREEMPT_DYNAMIC (Debian 11's 5.10) lack it, and a spinlock leaves their count at 0.
  bool preempt_count_counts_locks = false;
  std::optional<uint32_t> steal_time;  // KVM's struct kvm_steal_time (CONFIG_KVM_GUEST)
  bool located() const { return task_cfs_rq && cfs_rq_rq && runqueues; }
};

// Computed on first use from a KernelFeatures, then kept (a later ReleaseBtf does not lose it).
class KernelLayout {
 public:
  explicit KernelLayout(KernelFeatures& kernel) : kernel_(kernel) {}

  const TaskStructLayout& Task();
  const CgroupLayout& Cgroup();
  const TracepointArity& Tracepoints();
  const PercpuLayout& Percpu();
  // kUnknown is not kept: tracefs may become reachable later (a probe retry asks again).
  PercpuAllocLayout PercpuAlloc();

 private:
  KernelFeatures& kernel_;
  std::mutex mu_;
  std::optional<TaskStructLayout> task_;
  std::optional<CgroupLayout> cgroup_;
  std::optional<TracepointArity> tracepoints_;
  std::optional<PercpuLayout> percpu_;
  const TracepointArity& TracepointsLocked();
  std::optional<PercpuAllocLayout> percpu_alloc_;
};

}  // namespace kpath
