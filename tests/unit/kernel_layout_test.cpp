// KernelLayout: each offset and tracepoint layout is asked of the kernel once and kept.
#include "probes/kernel/kernel_layout.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "fake_kernel_features.h"

namespace kpath {
namespace {

const std::filesystem::path kLinux618 =
    std::filesystem::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";
const std::filesystem::path kLinux419 = std::filesystem::path(KPATH_FIXTURES) / "linux-4.19-x86_64";

TEST_CASE("task_struct and cgroup offsets come from BTF, once", "[kernel][layout]") {
  FakeKernelFeatures kernel;
  kernel.btf_members = {{"task_struct.comm", 3000},
                        {"task_struct.pid", 2400},
                        {"task_struct.tgid", 2404},
                        {"cgroup.kn", 264},
                        {"kernfs_node.hash", 56},
                        {"cgroup.self", 0},
                        {"cgroup_subsys_state.parent", 184},
                        {"cgroup_subsys_state.serial_nr", 168}};
  const TaskStructLayout& task = kernel.Layout().Task();
  CHECK(task.comm == 3000u);
  CHECK(task.pid == 2400u);
  CHECK(task.tgid == 2404u);
  const CgroupLayout& cgroup = kernel.Layout().Cgroup();
  CHECK(cgroup.complete());
  CHECK(cgroup.cgroup_parent == 184u);  // cgroup.self + css.parent
  // Kept: a kernel that later lost its BTF (ReleaseBtf) still has the answers.
  kernel.btf = false;
  CHECK(kernel.Layout().Task().comm == 3000u);
}

TEST_CASE("without BTF no offset is known", "[kernel][layout]") {
  FakeKernelFeatures kernel;
  kernel.btf = false;
  CHECK_FALSE(kernel.Layout().Task().comm);
  CHECK_FALSE(kernel.Layout().Cgroup().complete());
}

// The per-CPU offsets are the development VM's (Linux 6.18.44 x86_64); the members, any.
TEST_CASE("another CPU's per-CPU data: run queue path and variables from BTF",
          "[kernel][layout][irqoff]") {
  FakeKernelFeatures kernel;
  kernel.btf_members = {{"task_struct.se", 192}, {"sched_entity.cfs_rq", 168}, {"cfs_rq.rq", 216}};
  kernel.btf_percpu_vars = {
      {"runqueues", 195776}, {"__preempt_count", 86064}, {"steal_time", 97280}};
  kernel.btf_functions = {"preempt_schedule"};
  const PercpuLayout& percpu = kernel.Layout().Percpu();
  CHECK(percpu.located());
  CHECK(percpu.task_cfs_rq == 360u);
  CHECK(percpu.cfs_rq_rq == 216u);
  CHECK(percpu.runqueues == 195776u);
  CHECK(percpu.preempt_count == 86064u);
  CHECK(percpu.preempt_count_counts_locks);
  CHECK(percpu.steal_time == 97280u);
}

TEST_CASE("per-CPU data: pcpu_hot (6.2-6.14), no PREEMPT_COUNT (5.10), no BTF",
          "[kernel][layout][irqoff]") {
  FakeKernelFeatures hot;
  hot.btf_members = {{"task_struct.se", 192},
                     {"sched_entity.cfs_rq", 168},
                     {"cfs_rq.rq", 216},
                     {"pcpu_hot.preempt_count", 8}};
  hot.btf_percpu_vars = {{"runqueues", 4096}, {"pcpu_hot", 1024}};
  CHECK(hot.Layout().Percpu().preempt_count == 1032u);
  // Debian 11's 5.10 (PREEMPT_VOLUNTARY, before PREEMPT_DYNAMIC): no preempt_schedule, so a
  // spinlock does not count and the preempt count cannot say that IRQs are on.
  CHECK_FALSE(hot.Layout().Percpu().preempt_count_counts_locks);

  FakeKernelFeatures no_group_sched;  // CONFIG_FAIR_GROUP_SCHED off: no cfs_rq.rq
  no_group_sched.btf_members = {{"task_struct.se", 192}, {"sched_entity.cfs_rq", 168}};
  no_group_sched.btf_percpu_vars = {{"runqueues", 4096}};
  CHECK_FALSE(no_group_sched.Layout().Percpu().located());

  FakeKernelFeatures none;
  none.btf = false;
  none.btf_members = hot.btf_members;
  none.btf_percpu_vars = hot.btf_percpu_vars;
  CHECK_FALSE(none.Layout().Percpu().located());
  CHECK_FALSE(none.Layout().Percpu().preempt_count);
}

TEST_CASE("tracepoint arities come from BTF, once", "[kernel][layout]") {
  FakeKernelFeatures kernel;
  kernel.btf_tracepoints = {{"cgroup_mkdir", 2},         {"cgroup_rmdir", 2},
                            {"sched_switch", 4},         {"tlb_flush", 2},
                            {"percpu_alloc_percpu", 10}, {"percpu_free_percpu", 3}};
  const TracepointArity& arity = kernel.Layout().Tracepoints();
  CHECK(arity.cgroup_mkdir == 2);
  CHECK(arity.cgroup_rmdir == 2);
  CHECK(arity.sched_switch == 4);
  CHECK(arity.tlb_flush == 2);
  CHECK(arity.percpu_alloc_percpu == 10);
  CHECK(arity.percpu_free_percpu == 3);
  CHECK(arity.SchedSwitchHasPrev());
  CHECK(TracepointArity::CgroupHasPath(arity.cgroup_mkdir));
  // Kept: asked once.
  kernel.btf_tracepoints.clear();
  CHECK(kernel.Layout().Tracepoints().sched_switch == 4);
  CHECK(&kernel.Layout().Tracepoints() == &arity);
}

TEST_CASE("tracepoint arities: older prototypes and no BTF", "[kernel][layout]") {
  FakeKernelFeatures old;
  // cgroup events before the path argument; sched_switch before `preempt` (prev, next).
  old.btf_tracepoints = {{"cgroup_mkdir", 1}, {"sched_switch", 2}};
  CHECK_FALSE(TracepointArity::CgroupHasPath(old.Layout().Tracepoints().cgroup_mkdir));
  CHECK_FALSE(old.Layout().Tracepoints().SchedSwitchHasPrev());
  CHECK_FALSE(old.Layout().Tracepoints().cgroup_rmdir);  // not in BTF
  FakeKernelFeatures v44;
  v44.btf_tracepoints = {{"sched_switch", 3}};  // (preempt, prev, next)
  CHECK(v44.Layout().Tracepoints().SchedSwitchHasPrev());

  FakeKernelFeatures none;
  none.btf = false;
  none.btf_tracepoints = {{"cgroup_mkdir", 2}, {"sched_switch", 4}, {"tlb_flush", 2}};
  const TracepointArity& arity = none.Layout().Tracepoints();
  CHECK_FALSE(arity.cgroup_mkdir);
  CHECK_FALSE(arity.sched_switch);
  CHECK_FALSE(arity.tlb_flush);
  CHECK_FALSE(arity.SchedSwitchHasPrev());
  CHECK_FALSE(TracepointArity::CgroupHasPath(std::nullopt));
}

TEST_CASE("percpu_alloc_percpu's layout from BTF arity, else from its format", "[kernel][layout]") {
  FakeKernelFeatures btf10;
  btf10.btf_tracepoints = {{"percpu_alloc_percpu", 10}};
  CHECK(btf10.Layout().PercpuAlloc() == PercpuAllocLayout::kWithBytesAlloc);
  FakeKernelFeatures btf7;
  btf7.btf_tracepoints = {{"percpu_alloc_percpu", 7}};
  CHECK(btf7.Layout().PercpuAlloc() == PercpuAllocLayout::kLegacy);
  FakeKernelFeatures btf3;
  btf3.btf_tracepoints = {{"percpu_alloc_percpu", 3}};
  CHECK(btf3.Layout().PercpuAlloc() == PercpuAllocLayout::kUnknown);

  for (const auto& [tree, expected] : {std::pair{kLinux618, PercpuAllocLayout::kWithBytesAlloc},
                                       std::pair{kLinux419, PercpuAllocLayout::kLegacy}}) {
    FakeKernelFeatures classic;
    classic.btf = false;
    classic.tracefs = tree;
    classic.fixture_tree = tree;
    classic.tracepoints = {"percpu/percpu_alloc_percpu"};
    CHECK(classic.Layout().PercpuAlloc() == expected);
  }
  // Unknown is asked again: tracefs may come later.
  FakeKernelFeatures later;
  later.btf = false;
  CHECK(later.Layout().PercpuAlloc() == PercpuAllocLayout::kUnknown);
  later.tracefs = kLinux618;
  later.fixture_tree = kLinux618;
  later.tracepoints = {"percpu/percpu_alloc_percpu"};
  CHECK(later.Layout().PercpuAlloc() == PercpuAllocLayout::kWithBytesAlloc);
}

}  // namespace
}  // namespace kpath
