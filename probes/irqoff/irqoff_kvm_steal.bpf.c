// SPDX-License-Identifier: GPL-2.0
/* The same programs as irqoff.bpf.c, with the software tick subtracting KVM steal time (time the
 * hypervisor kept this vCPU from running, which delays a tick as IRQs off would). A separate
 * object because the kernel must resolve the per-CPU variable `steal_time` when it loads any
 * program of an object that names it: only x86 KVM guests whose kallsyms lists data symbols. */
#define IRQOFF_KVM_STEAL 1
#include "irqoff.bpf.c"
