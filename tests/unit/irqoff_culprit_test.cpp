// The culprit rule (probes/irqoff/culprit.h) on real stacks captured on Linux 6.18.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "probes/irqoff/culprit.h"

using namespace kpath;

namespace {

struct CapturedStack {
  std::string source;
  std::string culprit;
  std::vector<std::optional<std::string>> frames;
};

// "name+offset" -> "name" without a clone suffix (as KallsymsIndex::Symbolize names frames);
// "0x..." -> an unnamed frame.
std::optional<std::string> FrameName(const std::string& line) {
  if (line.rfind("0x", 0) == 0) return std::nullopt;
  std::string name = line.substr(0, line.find('+'));
  return name.substr(0, name.find('.'));
}

std::vector<CapturedStack> LoadStacks() {
  std::ifstream in(std::filesystem::path(KPATH_FIXTURES) /
                   "linux-6.18.44-x86_64/irqoff/stacks.txt");
  REQUIRE(in.good());
  std::vector<CapturedStack> stacks;
  CapturedStack current;
  bool open = false;
  auto flush = [&] {
    if (open) stacks.push_back(current);
    current = CapturedStack{};
    open = false;
  };
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      flush();
      continue;
    }
    if (line[0] == '#') continue;
    open = true;
    if (line.rfind("source: ", 0) == 0) {
      current.source += line.substr(8);
    } else if (line.rfind("culprit: ", 0) == 0) {
      current.culprit = line.substr(9);
    } else {
      current.frames.push_back(FrameName(line));
    }
  }
  flush();
  return stacks;
}

std::vector<std::optional<std::string>> Frames(std::initializer_list<const char*> names) {
  std::vector<std::optional<std::string>> frames;
  for (const char* n : names) {
    frames.push_back(n == nullptr ? std::nullopt : std::optional<std::string>(n));
  }
  return frames;
}

}  // namespace

TEST_CASE("the culprit of every captured 6.18 stack is the first frame that is not plumbing",
          "[irqoff][culprit]") {
  std::vector<CapturedStack> stacks = LoadStacks();
  REQUIRE(stacks.size() >= 18);
  for (const CapturedStack& stack : stacks) {
    INFO("source: " << stack.source << ", top frame: "
                    << (stack.frames.empty() || !stack.frames[0] ? "?" : *stack.frames[0]));
    REQUIRE(!stack.culprit.empty());
    CHECK(IrqOffCulprit(stack.frames) == stack.culprit);
  }
}

TEST_CASE("seed 001's slabinfo walk is charged to the partial-list counter, not the unlock",
          "[irqoff][culprit]") {
  CHECK(IrqOffCulprit(Frames({"_raw_spin_unlock_irqrestore", "count_partial_free_approx",
                              "get_slabinfo", "slab_show"})) == "count_partial_free_approx");
  // Older kernels walk the whole list in count_partial.
  CHECK(IrqOffCulprit(Frames({"_raw_spin_unlock_irqrestore", "count_partial", "get_slabinfo"})) ==
        "count_partial");
}

TEST_CASE("lock, interrupt, timer and tracing frames are plumbing, code that uses them is not",
          "[irqoff][culprit]") {
  for (const char* plumbing : {"_raw_spin_unlock_irqrestore",
                               "_raw_spin_unlock_irq",
                               "_raw_read_unlock_irqrestore",
                               "_raw_spin_lock_irqsave",
                               "__raw_spin_unlock_irq",
                               "native_queued_spin_lock_slowpath",
                               "arch_local_irq_restore",
                               "trace_hardirqs_on",
                               "asm_sysvec_apic_timer_interrupt",
                               "sysvec_apic_timer_interrupt",
                               "__sysvec_apic_timer_interrupt",
                               "irqentry_exit",
                               "irq_exit_rcu",
                               "__irq_exit_rcu",
                               "handle_softirqs",
                               "__do_softirq",
                               "do_syscall_64",
                               "entry_SYSCALL_64_after_hwframe",
                               "syscall_exit_work",
                               "exit_to_user_mode_loop",
                               "el1_interrupt",
                               "el1h_64_irq_handler",
                               "__irq_svc",
                               "gic_handle_irq",
                               "hrtimer_interrupt",
                               "__hrtimer_run_queues",
                               "tick_sched_timer",
                               "local_apic_timer_interrupt",
                               "bpf_trace_run2",
                               "bpf_local_irq_restore",
                               "__bpf_prog_enter_recur",
                               "trace_call_bpf",
                               "perf_syscall_enter",
                               "syscall_trace_enter",
                               "__traceiter_irq_enable",
                               "__x86_indirect_thunk_rax",
                               "__x86_return_thunk",
                               "bpf_prog_0123456789abcdef_irqoff_tick",
                               "bpf_prog_0123456789abcdef_irqoff_enable_t"}) {
    INFO(plumbing);
    CHECK(IsIrqOffPlumbing(plumbing));
  }
  for (const char* culprit :
       {"count_partial", "get_slabinfo", "show_interrupts", "try_to_wake_up", "rcu_core",
        "finish_task_switch", "serial8250_handle_irq", "mlx5_eq_comp_int", "ticket_spin_lock",
        "exc_page_fault", "bpf_prog_0123456789abcdef_hold_irqs_off"}) {
    INFO(culprit);
    CHECK_FALSE(IsIrqOffPlumbing(culprit));
  }
}

TEST_CASE("a BPF program holding IRQs off is named by its program name, without its tag",
          "[irqoff][culprit]") {
  CHECK(IrqOffCulprit(Frames({"bpf_local_irq_restore", "bpf_prog_6deef7357e7b4530_hold_irqs_off",
                              "trace_call_bpf", "perf_syscall_enter"})) == "bpf:hold_irqs_off");
  CHECK(IrqOffCulprit(Frames({"bpf_prog_6deef7357e7b4530", "perf_syscall_enter"})) ==
        "bpf:unnamed");
  // kpathd's own detector programs are how regions are seen, never their cause.
  CHECK(IrqOffCulprit(Frames({"bpf_prog_6deef7357e7b4530_irqoff_enable_t", "trace_hardirqs_on",
                              "_raw_spin_unlock_irqrestore", "get_slabinfo"})) == "get_slabinfo");
  // bpf_prog_ without a 16-digit tag is a kernel function (plumbing by its bpf_ prefix).
  CHECK(IsIrqOffPlumbing("bpf_prog_run_array_uprobe"));
}

TEST_CASE("unnamed frames are skipped and a stack of nothing else is unknown",
          "[irqoff][culprit]") {
  CHECK(IrqOffCulprit(Frames({})) == "unknown");
  CHECK(IrqOffCulprit(Frames({nullptr, nullptr})) == "unknown");
  CHECK(IrqOffCulprit(Frames({nullptr, "_raw_spin_unlock_irq", "virtio_commit_rqs"})) ==
        "virtio_commit_rqs");
  CHECK(IrqOffCulprit(Frames({"do_syscall_64", "entry_SYSCALL_64_after_hwframe"})) == "unknown");
  CHECK(IrqOffCulprit(Frames({""})) == "unknown");
}
