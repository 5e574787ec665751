#include "probes/irqoff/culprit.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "fmt/format.h"
#include "probes/kernel/kernel_symbolizer.h"

namespace kpath {

namespace {

// Exact names.
constexpr std::string_view kPlumbingNames[] = {
    "arch_local_irq_enable",
    "arch_local_irq_restore",
    "native_irq_enable",
    "local_irq_enable",
    "local_irq_restore",
    "common_interrupt",
    "__irq_exit_rcu",
    "handle_softirqs",
    "__do_softirq",
    "__local_bh_enable_ip",
    "do_syscall_64",
    "ret_from_intr",
    "__el1_irq",
    "__irq_svc",
    "gic_handle_irq",
    "call_on_irq_stack",
    "do_interrupt_handler",
    "local_apic_timer_interrupt",
    "trace_call_bpf",
    "syscall_trace_enter",
    "__x86_return_thunk",
};

// Prefixes.
constexpr std::string_view kPlumbingPrefixes[] = {
    // Locking and IRQ re-enabling primitives: the culprit is their caller.
    "_raw_",
    "__raw_",
    "queued_spin_lock_slowpath",
    "native_queued_spin_lock_slowpath",
    "__pv_queued_spin_lock_slowpath",
    "do_raw_spin_",
    "trace_hardirqs_on",
    "lockdep_hardirqs_on",
    // Interrupt and exception entry and exit.
    "asm_sysvec_",
    "asm_common_interrupt",
    "asm_exc_",
    "sysvec_",
    "__sysvec_",
    "irqentry_",
    "irq_enter",
    "irq_exit",
    "do_softirq",
    "handle_irq_event",
    "handle_edge_irq",
    "handle_level_irq",
    "handle_fasteoi_irq",
    "generic_handle_",
    "__handle_irq_",
    "entry_SYSCALL_",
    "syscall_exit_",
    "exit_to_user_mode",
    "el0_",
    "el1_",
    "el1h_",
    "el0t_",
    // The timer interrupt the detector samples with.
    "hrtimer_",
    "__hrtimer_",
    "tick_",
    "clockevents_",
    "arch_timer_handler_",
    // Tracing and BPF.
    "bpf_",
    "__bpf_",
    "___bpf_",
    "__traceiter_",
    "perf_",
    "__perf_",
    "ftrace_",
    "kprobe_",
    "rethook_",
    "arch_rethook_",
    "__x86_indirect_thunk_",
    "__x86_indirect_call_thunk_",
    "__x86_indirect_jump_thunk_",
    "srso_",
    "__pfx_",
};

// kpathd's own detector programs (their JIT symbols carry at most 15 characters of the name).
constexpr std::string_view kOwnProgramPrefix = "irqoff_";

}  // namespace

bool IsIrqOffPlumbing(std::string_view function) {
  if (std::optional<std::string_view> program = BpfProgramName(function)) {
    return program->starts_with(kOwnProgramPrefix);
  }
  if (std::find(std::begin(kPlumbingNames), std::end(kPlumbingNames), function) !=
      std::end(kPlumbingNames)) {
    return true;
  }
  return std::any_of(std::begin(kPlumbingPrefixes), std::end(kPlumbingPrefixes),
                     [&](std::string_view prefix) { return function.starts_with(prefix); });
}

std::string IrqOffCulprit(std::span<const std::optional<std::string>> frames) {
  for (const std::optional<std::string>& frame : frames) {
    if (!frame || frame->empty() || IsIrqOffPlumbing(*frame)) continue;
    if (std::optional<std::string_view> program = BpfProgramName(*frame)) {
      return fmt::format("bpf:{}", program->empty() ? "unnamed" : *program);
    }
    return *frame;
  }
  return std::string(kUnknownCulprit);
}

}  // namespace kpath
