/* Types shared between irqoff.bpf.c and the user-space detector. Fixed-width types only. */
#ifndef KPATH_IRQOFF_H
#define KPATH_IRQOFF_H

/* Kernel frames kept per region: the culprit is within the first few frames above the
 * interrupt/unlock plumbing, and the rest is for the log line. */
#define IRQOFF_STACK_DEPTH 32

/* Histogram upper bounds of kpath_irqoff_seconds, in microseconds (metrics contract: 0.5 ms to
 * 1 s). The BPF side buckets each region so the histogram is exact even when events are lost. */
#define IRQOFF_BUCKETS 11
#define IRQOFF_BUCKET_BOUNDS_US \
  { 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000 }

/* How a region was measured (irqoff_event.source). */
enum irqoff_source {
  IRQOFF_SOURCE_SOFTWARE_TIMER = 0, /* late cpu-clock tick: length = lateness, stack at the end */
  IRQOFF_SOURCE_NMI = 1,            /* late tick, stack sampled by an NMI while IRQs were off */
  IRQOFF_SOURCE_PREEMPTIRQ = 2,     /* irq_disable/irq_enable tracepoints: exact length */
};

/* irqoff_event.flags */
#define IRQOFF_EVENT_TASK_SWITCHED                                                           \
  1                              /* the late tick landed in another thread than the one that \
                                    ran when IRQs went off (comm/pid are the latter's) */
#define IRQOFF_EVENT_USER_MODE 2 /* the late tick interrupted user code: no kernel frames */
#define IRQOFF_EVENT_UNWITNESSED                                                         \
  4 /* no other CPU looked at this CPU while its tick was overdue (all late together, or \
       the witness cannot read per-CPU data): counted without that check */

/* One IRQ-disabled region above the threshold, sent to user space (ring buffer or perf buffer). */
struct irqoff_event {
  __u64 length_ns; /* best estimate of the region's length */
  __u64 late_ns;   /* software timers: how late the tick was (before steal correction) */
  __u64 stolen_ns; /* steal time (hypervisor) subtracted from the lateness */
  __u64 end_ns;    /* bpf_ktime_get_ns() when the region was seen to end */
  __u32 cpu;
  __u32 pid;        /* thread that held IRQs off, as far as seen (logs only, never a label) */
  __u32 source;     /* enum irqoff_source */
  __s32 stack_size; /* bytes of `stack` filled (bpf_get_stack result; < 0: error) */
  __u32 flags;      /* IRQOFF_EVENT_* */
  __u32 reserved;
  char comm[16]; /* the thread of `pid` */
  /* preemptirq: the code that disabled IRQs (the tracepoint's ip and parent ip); 0 otherwise. */
  __u64 disable_site[2];
  __u64 stack[IRQOFF_STACK_DEPTH];
};

/* Per-CPU running totals (percpu array `irqoff_totals`, one entry). Cumulative since load. */
struct irqoff_totals {
  __u64 ticks;                       /* timer samples (software timer, NMI stamps) */
  __u64 nmis;                        /* hardware NMI samples */
  __u64 regions;                     /* regions at or above the threshold */
  __u64 region_ns;                   /* their summed lengths */
  __u64 buckets[IRQOFF_BUCKETS + 1]; /* non-cumulative; the last is +Inf */
  __u64 late_idle;                   /* late ticks explained by the CPU having been idle */
  __u64 late_steal;                  /* late ticks explained by steal time (vCPU not running) */
  __u64 late_user;                   /* regions whose late tick interrupted user code */
  /* Late ticks a witness CPU explained (irqoff_cpu_watch): while the tick was overdue it saw */
  __u64 late_host_preempted; /* KVM's flag that the host had preempted the vCPU */
  __u64 late_preemptible;    /* the CPU preemptible (IRQs on) less than the threshold before */
  __u64 unwitnessed;         /* regions no witness saw (all CPUs late, or none can read) */
  __u64 late_vm_pause;       /* on a VM, late with its neighbours (vm_pause_rule): a VM pause */
  __u64 events_lost;         /* regions whose event found the buffer full: counted, no labels */
};

/* Context switches kept per CPU to tell which thread ran when IRQs went off: enough for the
 * switches between a region's end and a late tick delivered a few milliseconds after it (as
 * some hypervisors do) on a busy CPU. A power of two. */
#define IRQOFF_SWITCHES 16

struct irqoff_switch {
  __u64 ns;       /* bpf_ktime_get_ns() at the switch */
  __u32 prev_pid; /* the thread switched out */
  __u32 reserved;
  char prev_comm[16];
};

/* Per-CPU detector state (percpu array `irqoff_cpu_state`, one entry). BPF only. */
struct irqoff_cpu_state {
  __u64 last_tick_ns;   /* last timer sample: IRQs were on then */
  __u64 last_steal_ns;  /* steal clock at that sample (0: not read) */
  __u64 irqs_off_since; /* preemptirq: when IRQs were disabled (0: they are on) */
  __u64 disable_site[2];
  __u64 nmi_stack_for; /* NMI: last_tick_ns of the region whose stack is in irqoff_nmi_stack */
  __u32 generation;    /* irqoff_cpu_generation[cpu] this state belongs to */
  __u32 switch_count;  /* switches recorded; the newest is switches[(count - 1) % N] */
  struct irqoff_switch switches[IRQOFF_SWITCHES];
};

/* CPUs that look at another CPU's overdue tick (the next ones in CPU order). */
#define IRQOFF_WITNESSES 2

/* What other CPUs may read of a CPU (array `irqoff_cpu_watch`, indexed by CPU). A software tick
 * that IRQs off hold back and one that the hypervisor holds back (the vCPU not running, or in a
 * long exit) look the same to the CPU itself, even in where the late tick lands on hypervisors
 * that deliver it only at the next exit. Other CPUs keep ticking: while this CPU's tick is
 * overdue, each witness reads this CPU's preempt count (0: preemptible, so IRQs were on: kernel
 * code holds them off under a lock, in an interrupt or with preemption off) and KVM's flag that
 * the host preempted the vCPU, and notes here what it saw for the late tick to judge: a region
 * can only be as long as the longest stretch in which the CPU was never seen preemptible. */
struct irqoff_cpu_watch {
  __u64 last_tick_ns; /* mirror of irqoff_cpu_state.last_tick_ns */
  __u64 idle_exit_ns; /* last exit from the idle loop */
  __u64 percpu_base;  /* this CPU's per-CPU area, minus the section start (0: not known) */
  __u64 watched_gap;  /* last_tick_ns of the overdue tick the fields below are about */
  /* Seen preemptible (IRQs on) at irqs_on_ns last (0: never); between two such moments (or the
   * last tick and the first) it was seen non-preemptible: the longest such stretch, which is as
   * long as a region among them can have been. */
  __u64 irqs_on_ns;
  __u64 longest_held_ns;
  __u32 in_idle;
  __u32 observations;   /* witness ticks that saw this CPU's tick overdue */
  __u32 host_preempted; /* ... and KVM's preempted flag set */
  __u32 holding;        /* the last of them saw it non-preemptible */
  /* This CPU's last tick late by more than a period: its missed expiry and when it came. The
   * other CPUs compare their own late tick with it (irqoff.bpf.c: neighbours_late_too). */
  __u64 late_due_ns;
  __u64 late_end_ns;
};

#endif
