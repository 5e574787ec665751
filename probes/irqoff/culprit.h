// Which kernel function held IRQs off, from the stack seen when the region ended: the first
// frame that is not plumbing. A pure function of symbol names, so it is tested on real stacks
// (tests/fixtures/linux-6.18.44-x86_64/irqoff/stacks.txt).
//
// The stack is ordered innermost first, as the kernel's unwinder gives it. Plumbing is code that
// sits on such a stack because of how a region ends or is observed, not because it chose to
// keep IRQs off:
//  - locking and IRQ re-enabling primitives, which end every region on behalf of their caller:
//    _raw_* and __raw_* (_raw_spin_unlock_irqrestore, _raw_spin_lock_irqsave, ...),
//    queued_spin_lock_slowpath and its native_/__pv_ variants, do_raw_spin_*,
//    arch_local_irq_{enable,restore}, native_irq_enable, local_irq_{enable,restore},
//    trace_hardirqs_on*, lockdep_hardirqs_on*;
//  - interrupt, exception and syscall entry/exit (a region may end on return from an
//    interrupt; the late tick may land in a softirq or on the way back to user space):
//    asm_sysvec_*, asm_common_interrupt, asm_exc_*, sysvec_*, __sysvec_*, common_interrupt,
//    irqentry_*, irq_enter*, irq_exit*, __irq_exit_rcu, handle_softirqs, __do_softirq,
//    do_softirq*, __local_bh_enable_ip, handle_irq_event*, handle_{edge,level,fasteoi}_irq,
//    generic_handle_*, __handle_irq_*, entry_SYSCALL_*, do_syscall_64, syscall_exit_*,
//    exit_to_user_mode*, ret_from_intr, and arm64's el0_*, el1_*, el1h_*, el0t_*, __el1_irq,
//    __irq_svc, gic_handle_irq, call_on_irq_stack, do_interrupt_handler;
//  - the timer the detector samples with: hrtimer_*, __hrtimer_*, tick_*, clockevents_*,
//    local_apic_timer_interrupt, arch_timer_handler_*;
//  - tracing and BPF machinery: bpf_* and __bpf_*/___bpf_* (helpers, kfuncs, trampolines,
//    bpf_trace_run*), trace_call_bpf, __traceiter_*, perf_*, __perf_*, syscall_trace_enter,
//    ftrace_*, kprobe_*, rethook_*, and the retpoline/return thunks __x86_indirect_*_thunk_*,
//    __x86_return_thunk, srso_*; kpathd's own detector programs (bpf_prog_<tag>_irqoff_*).
// Any other BPF program is a culprit of its own and is named "bpf:<program name>" (its JIT
// symbol bpf_prog_<16 hex tag>_<name> without the tag, which changes with its code).
// Frames that could not be symbolized are skipped as well. When nothing is left the culprit is
// "unknown" (for example when the late tick was delivered to user code).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kpath {

inline constexpr std::string_view kUnknownCulprit = "unknown";

// True when `function` (a symbol name without offset or clone suffix) is plumbing by the rule
// above.
bool IsIrqOffPlumbing(std::string_view function);

// The first frame of `frames` (innermost first; nullopt: not symbolized) that is not plumbing,
// or kUnknownCulprit.
std::string IrqOffCulprit(std::span<const std::optional<std::string>> frames);

}  // namespace kpath
