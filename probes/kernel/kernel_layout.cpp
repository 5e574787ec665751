#include "probes/kernel/kernel_layout.h"

#include "probes/kernel/kernel_features.h"

namespace kpath {

const TaskStructLayout& KernelLayout::Task() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!task_) {
    task_ = TaskStructLayout{
        .comm = kernel_.BtfMemberOffset("task_struct", "comm"),
        .pid = kernel_.BtfMemberOffset("task_struct", "pid"),
        .tgid = kernel_.BtfMemberOffset("task_struct", "tgid"),
    };
  }
  return *task_;
}

const CgroupLayout& KernelLayout::Cgroup() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cgroup_) {
    CgroupLayout layout{
        .cgroup_kn = kernel_.BtfMemberOffset("cgroup", "kn"),
        .kernfs_node_hash = kernel_.BtfMemberOffset("kernfs_node", "hash"),
        .kernfs_node_name = kernel_.BtfMemberOffset("kernfs_node", "name"),
        .cgroup_parent = std::nullopt,
        .css_serial_nr = kernel_.BtfMemberOffset("cgroup_subsys_state", "serial_nr"),
        .cgroup_root = kernel_.BtfMemberOffset("cgroup", "root"),
        .root_hierarchy_id = kernel_.BtfMemberOffset("cgroup_root", "hierarchy_id"),
    };
    std::optional<uint32_t> self = kernel_.BtfMemberOffset("cgroup", "self");
    std::optional<uint32_t> parent = kernel_.BtfMemberOffset("cgroup_subsys_state", "parent");
    if (self && parent) layout.cgroup_parent = *self + *parent;
    cgroup_ = layout;
  }
  return *cgroup_;
}

const PercpuLayout& KernelLayout::Percpu() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!percpu_) {
    PercpuLayout layout{
        .task_cfs_rq = std::nullopt,
        .cfs_rq_rq = kernel_.BtfMemberOffset("cfs_rq", "rq"),
        .runqueues = kernel_.BtfPercpuVarOffset("runqueues"),
        .preempt_count = kernel_.BtfPercpuVarOffset("__preempt_count"),
        .preempt_count_counts_locks = kernel_.BtfHasFunction("preempt_schedule"),
        .steal_time = kernel_.BtfPercpuVarOffset("steal_time"),
    };
    std::optional<uint32_t> se = kernel_.BtfMemberOffset("task_struct", "se");
    std::optional<uint32_t> cfs_rq = kernel_.BtfMemberOffset("sched_entity", "cfs_rq");
    if (se && cfs_rq) layout.task_cfs_rq = *se + *cfs_rq;
    if (!layout.preempt_count) {
      std::optional<uint32_t> hot = kernel_.BtfPercpuVarOffset("pcpu_hot");
      std::optional<uint32_t> member = kernel_.BtfMemberOffset("pcpu_hot", "preempt_count");
      if (hot && member) layout.preempt_count = *hot + *member;
    }
    percpu_ = layout;
  }
  return *percpu_;
}

const TracepointArity& KernelLayout::Tracepoints() {
  std::lock_guard<std::mutex> lock(mu_);
  return TracepointsLocked();
}

const TracepointArity& KernelLayout::TracepointsLocked() {
  if (!tracepoints_) {
    tracepoints_ = TracepointArity{
        .cgroup_mkdir = kernel_.BtfTracepointArgs("cgroup_mkdir"),
        .cgroup_rmdir = kernel_.BtfTracepointArgs("cgroup_rmdir"),
        .sched_switch = kernel_.BtfTracepointArgs("sched_switch"),
        .tlb_flush = kernel_.BtfTracepointArgs("tlb_flush"),
        .percpu_alloc_percpu = kernel_.BtfTracepointArgs("percpu_alloc_percpu"),
        .percpu_free_percpu = kernel_.BtfTracepointArgs("percpu_free_percpu"),
    };
  }
  return *tracepoints_;
}

PercpuAllocLayout KernelLayout::PercpuAlloc() {
  std::lock_guard<std::mutex> lock(mu_);
  if (percpu_alloc_) return *percpu_alloc_;
  PercpuAllocLayout layout = PercpuAllocLayout::kUnknown;
  if (std::optional<int> args = TracepointsLocked().percpu_alloc_percpu) {
    if (*args >= 9) {
      layout = PercpuAllocLayout::kWithBytesAlloc;
    } else if (*args >= 7) {
      layout = PercpuAllocLayout::kLegacy;
    }
    percpu_alloc_ = layout;  // BTF's answer is final
    return layout;
  }
  absl::StatusOr<TracepointFormat> format = kernel_.Tracepoint("percpu", "percpu_alloc_percpu");
  if (!format.ok()) return layout;
  layout =
      format->Find("bytes_alloc") ? PercpuAllocLayout::kWithBytesAlloc : PercpuAllocLayout::kLegacy;
  percpu_alloc_ = layout;
  return layout;
}

}  // namespace kpath
