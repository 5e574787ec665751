// SPDX-License-Identifier: GPL-2.0
/* IRQ-disabled regions (seeds 001 and 004). User space loads exactly one set of programs, the
 * most precise the kernel offers:
 *
 *  1. preemptirq:irq_disable / irq_enable (kernels built with CONFIG_PREEMPTIRQ_TRACEPOINTS):
 *     every transition, exact lengths, the disabling call site. tp_btf, raw_tp or classic
 *     tracepoint programs.
 *  2. Hardware NMI sampling: the software tick below stamps "IRQs were on" every period, and a
 *     cycles event, delivered as an NMI even while IRQs are off, records the stack of a region in
 *     progress once the stamp is older than the threshold (irqoff_nmi).
 *  3. Software timers: a cpu-clock perf event (an hrtimer, so a hard interrupt) per CPU. IRQs off
 *     delay it; a tick that arrives late by more than the threshold closes a region of about the
 *     lateness, and the interrupted stack shows where IRQs came back on (irqoff_tick).
 *
 * Ticks are rare and cheap on the hot path (one comparison when on time); the stack walk and the
 * event only happen for a region above the threshold. */
/* kpath_bpf.h (vmlinux.h) first: the shared header uses its types. */
// clang-format off
#include "kpath_bpf.h"
#include "irqoff.h"
// clang-format on

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
KPATH_TUNABLE(__u64, period_ns, 1000000);    /* software tick period */
KPATH_TUNABLE(__u64, threshold_ns, 5000000); /* shortest region reported */
KPATH_TUNABLE(__u32, use_ringbuf, 1);        /* else the perf buffer (kernels before 5.8) */
KPATH_TUNABLE(__u64, stext, 0);              /* _stext: classic preemptirq fields are offsets */
KPATH_TUNABLE(__u32, tp_caller_offset, 0);
KPATH_TUNABLE(__u32, tp_caller_size, 0);
KPATH_TUNABLE(__u32, tp_parent_offset, 0);
KPATH_TUNABLE(__u32, tp_parent_size, 0);

/* Witnesses (irqoff_cpu_watch in irqoff.h). Per-CPU data of another CPU is found from its
 * per-CPU area, which each CPU learns from its own run queue: current->se.cfs_rq->rq is this
 * CPU's `runqueues` (CONFIG_FAIR_GROUP_SCHED), at percpu_runqueues from the start of the per-CPU
 * section. The offsets come from vmlinux BTF (its .data..percpu section), in user space, so that
 * this object needs no CO-RE. -1: not known. */
KPATH_TUNABLE(__u32, cpu_count, 1);             /* possible CPUs: irqoff_cpu_watch's size */
KPATH_TUNABLE(__s64, task_cfs_rq_offset, -1);   /* task_struct.se + sched_entity.cfs_rq */
KPATH_TUNABLE(__s64, cfs_rq_rq_offset, -1);     /* cfs_rq.rq */
KPATH_TUNABLE(__s64, percpu_runqueues, -1);     /* runqueues in the per-CPU section */
KPATH_TUNABLE(__s64, percpu_preempt_count, -1); /* the preempt count (x86: a per-CPU int) */
KPATH_TUNABLE(__s64, percpu_steal_time, -1);    /* KVM's struct kvm_steal_time */
/* Only where preempt_disable() counts (CONFIG_PREEMPT_COUNT, which CONFIG_PREEMPTION implies):
 * else a spinlock leaves the count at 0 and a preemptible-looking CPU may hold IRQs off. */
KPATH_TUNABLE(__u32, preempt_count_reliable, 0);
/* A virtual machine (user space asks cpuinfo, DMI, /sys/hypervisor) where the late ticks of every
 * CPU together are a pause of the VM, not a region (irqoff.ignore_vm_pauses). */
KPATH_TUNABLE(__u32, vm_pause_rule, 0);

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct irqoff_cpu_state);
} irqoff_cpu_state SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct irqoff_totals);
} irqoff_totals SEC(".maps");

/* Longest region per CPU, in two slots: programs write slot (epoch & 1), user space flips the
 * epoch each sample and then reads and clears the other slot, so the maximum is exact per
 * sample without user space ever writing a slot a program may be writing. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, __u64);
} irqoff_max SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} irqoff_epoch SEC(".maps");

/* Indexed by CPU; user space bumps a CPU's entry each time it (re)attaches that CPU's timer, so
 * the first tick after an attach (or after the CPU was offline) starts a fresh baseline instead
 * of measuring a gap across it. 0: the CPU is not armed. max_entries: possible CPUs, set at
 * open. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} irqoff_cpu_generation SEC(".maps");

/* Indexed by CPU, read by the other CPUs (struct irqoff_cpu_watch). max_entries: possible
 * CPUs, set at open. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct irqoff_cpu_watch);
} irqoff_cpu_watch SEC(".maps");

/* The event being built (too large for the BPF stack). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct irqoff_event);
} irqoff_scratch SEC(".maps");

/* The stack an NMI captured for the region in progress (see irqoff_nmi). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct irqoff_event);
} irqoff_nmi_stack SEC(".maps");

/* Regions for user space. On kernels without a ring buffer user space turns this map into a
 * small array (never used) and sets use_ringbuf to 0. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} irqoff_events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, sizeof(__u32));
} irqoff_events_perf SEC(".maps");

/* include/linux/preempt.h: PREEMPT_MASK 0xff, (SOFTIRQ_MASK 0xff00,) HARDIRQ_MASK 0xf0000, NMI_MASK
 * 0xf00000 (one bit, 0x100000, before v5.11: inside this mask too). */
#define IRQOFF_PREEMPT_HARDIRQ_NMI_MASK 0x00ff00ff

/* KVM's struct kvm_steal_time is the guest/host ABI (Documentation/virt/kvm/x86/msr.rst):
 * the steal clock in ns at 0, `preempted` (bit 0: the host preempted the vCPU) at 16. */
#define KVM_STEAL_TIME_PREEMPTED_OFFSET 16

#ifdef IRQOFF_KVM_STEAL
/* KVM's per-CPU steal-time record (irqoff_kvm_steal.bpf.c builds this file with it): the host
 * updates it before it resumes the vCPU, so at the late tick it already includes a preemption
 * that just ended. Resolving it needs the kernel to list it in kallsyms (KALLSYMS_ALL). */
extern const struct kvm_steal_time steal_time __ksym;

static __always_inline __u64 read_steal_ns(const struct irqoff_cpu_watch* w) {
  const struct kvm_steal_time* kst = bpf_this_cpu_ptr(&steal_time);
  return kst->steal;
}
#else
/* The same record through this CPU's per-CPU area, where kallsyms does not list it. */
static __always_inline __u64 read_steal_ns(const struct irqoff_cpu_watch* w) {
  __u64 steal = 0;
  if (percpu_steal_time < 0 || w->percpu_base == 0) return 0;
  bpf_probe_read_kernel(&steal, sizeof(steal), (void*)(w->percpu_base + percpu_steal_time));
  return steal;
}
#endif

/* This CPU's per-CPU area, from its run queue (see task_cfs_rq_offset). Once per CPU. */
static __always_inline void learn_percpu_base(struct irqoff_cpu_watch* w) {
  if (w->percpu_base != 0 || task_cfs_rq_offset < 0 || cfs_rq_rq_offset < 0 ||
      percpu_runqueues < 0) {
    return;
  }
  void* task = (void*)bpf_get_current_task();
  void* cfs_rq = 0;
  void* rq = 0;
  if (!task ||
      bpf_probe_read_kernel(&cfs_rq, sizeof(cfs_rq), (char*)task + task_cfs_rq_offset) != 0 ||
      !cfs_rq || bpf_probe_read_kernel(&rq, sizeof(rq), (char*)cfs_rq + cfs_rq_rq_offset) != 0 ||
      !rq) {
    return;
  }
  w->percpu_base = (__u64)rq - (__u64)percpu_runqueues;
}

/* A witness tick: CPU `other`'s tick is overdue by more than a period; look at what it is doing.
 * A CPU whose preempt count is 0 is not holding IRQs off in kernel code that counts (a lock, an
 * interrupt, preemption off): IRQs are on there, as at an on-time tick, so a region began after
 * that moment. A CPU whose host set KVM's preempted flag is not running at all. */
static __always_inline void witness(__u32 other, __u64 now) {
  __u32* generation = bpf_map_lookup_elem(&irqoff_cpu_generation, &other);
  struct irqoff_cpu_watch* w = bpf_map_lookup_elem(&irqoff_cpu_watch, &other);
  if (!generation || !w || *generation == 0) return;
  __u64 last = w->last_tick_ns;
  if (last == 0 || w->in_idle) return;
  __u64 base = last > w->idle_exit_ns ? last : w->idle_exit_ns;
  if (now < base + 2 * period_ns) return;
  if (w->watched_gap != last) {
    w->watched_gap = last;
    w->observations = 0;
    w->host_preempted = 0;
    w->irqs_on_ns = 0;
    w->longest_held_ns = 0;
    w->holding = 0;
  }
  __u64 area = w->percpu_base;
  if (area == 0) return; /* nothing to read: the late tick counts as unwitnessed */
  w->observations += 1;
  __u32 count = 1;
  if (percpu_preempt_count < 0 || !preempt_count_reliable ||
      bpf_probe_read_kernel(&count, sizeof(count), (void*)(area + percpu_preempt_count)) != 0) {
    count = 1;
  }
  /* IRQs are on unless preemption, a hard IRQ or an NMI is counted: the softirq bits (serving
   * softirqs, bottom halves off) run with IRQs on, and x86 keeps PREEMPT_NEED_RESCHED, inverted,
   * in bit 31. */
  if ((count & IRQOFF_PREEMPT_HARDIRQ_NMI_MASK) == 0) {
    if (w->holding) {
      __u64 since = w->irqs_on_ns != 0 ? w->irqs_on_ns : base;
      if (now - since > w->longest_held_ns) w->longest_held_ns = now - since;
    }
    w->holding = 0;
    w->irqs_on_ns = now;
  } else {
    w->holding = 1;
  }
  __u8 preempted = 0;
  if (percpu_steal_time >= 0 &&
      bpf_probe_read_kernel(&preempted, sizeof(preempted),
                            (void*)(area + percpu_steal_time + KVM_STEAL_TIME_PREEMPTED_OFFSET)) ==
          0 &&
      (preempted & 1)) {
    w->host_preempted += 1;
  }
}

/* This CPU's neighbours (the IRQOFF_WITNESSES next and previous online CPUs: every other CPU of
 * a VM of up to 2 x IRQOFF_WITNESSES + 1) were late across this one's late tick: each one's missed
 * expiry no later than a period after ours, and its late tick within two periods of ours (a
 * hypervisor may deliver a pending timer up to ~2 ms late) or still to come; none of them idled. A
 * hypervisor that stops the VM (its vCPUs descheduled, together or one after the other, then
 * resumed) does exactly that, wherever each vCPU was. IRQs held off in the guest do it only when
 * those CPUs went into an IRQ-off region before this one (or within a period after) and stayed
 * until it ended: a lock convoy's waiters, never its holder, which went in first (the rule's blind
 * spot, probes/irqoff/README.md). Only neighbours, not every CPU: a loop over every possible CPU
 * made the verifier take minutes on 6.1 with 40 possible CPUs. */
static __always_inline bool neighbours_late_too(__u32 cpu, __u64 due, __u64 now) {
  __u32 late_too = 0;
  KPATH_UNROLL_FOR_OLD_KERNELS
  for (__u32 i = 0; i < 2 * IRQOFF_WITNESSES; i++) {
    __u32 distance = i / 2 + 1;
    if (distance >= cpu_count) break;
    /* The next CPUs and the previous ones: with possible CPUs that are not online (a VM that
     * may hot-add some) one side may have none. */
    __u32 other = (i & 1) ? (cpu + cpu_count - distance) % cpu_count : (cpu + distance) % cpu_count;
    __u32* generation = bpf_map_lookup_elem(&irqoff_cpu_generation, &other);
    struct irqoff_cpu_watch* o = bpf_map_lookup_elem(&irqoff_cpu_watch, &other);
    if (!generation || !o) return false;
    if (*generation == 0) continue; /* offline: no timer */
    if (o->in_idle || o->last_tick_ns == 0) return false;
    __u64 base = o->last_tick_ns > o->idle_exit_ns ? o->last_tick_ns : o->idle_exit_ns;
    __u64 other_due = base + period_ns;
    __u64 other_end = now; /* still overdue */
    if (now < other_due + period_ns) {
      /* It ticked since: its last late tick. */
      other_due = o->late_due_ns;
      other_end = o->late_end_ns;
    }
    if (other_due == 0 || due + period_ns < other_due || other_end + 2 * period_ns < now) {
      return false;
    }
    late_too = 1;
  }
  return late_too != 0;
}

static __always_inline void count_region(struct irqoff_totals* t, __u64 length_ns) {
  static const __u64 bounds_us[IRQOFF_BUCKETS] = IRQOFF_BUCKET_BOUNDS_US;
  __u32 bucket = IRQOFF_BUCKETS;
  KPATH_UNROLL_FOR_OLD_KERNELS
  for (__u32 i = 0; i < IRQOFF_BUCKETS; i++) {
    if (length_ns <= bounds_us[i] * 1000) {
      bucket = i;
      break;
    }
  }
  t->regions += 1;
  t->region_ns += length_ns;
  if (bucket <= IRQOFF_BUCKETS) t->buckets[bucket] += 1;

  __u32 zero = 0;
  __u32* epoch = bpf_map_lookup_elem(&irqoff_epoch, &zero);
  __u32 slot = epoch ? (*epoch & 1) : 0;
  __u64* max = bpf_map_lookup_elem(&irqoff_max, &slot);
  if (max && length_ns > *max) *max = length_ns;
}

static __always_inline void emit(void* ctx, struct irqoff_event* e, struct irqoff_totals* t) {
  long err;
#ifndef KPATH_NO_GLOBAL_DATA /* no ring buffer (5.8) where there is no global data */
  if (use_ringbuf) {
    /* No wakeup: user space drains on its sampling clock, nobody waits on the ring. */
    err = bpf_ringbuf_output(&irqoff_events, e, sizeof(*e), BPF_RB_NO_WAKEUP);
  } else
#endif
  {
    err = bpf_perf_event_output(ctx, &irqoff_events_perf, BPF_F_CURRENT_CPU, e, sizeof(*e));
  }
  if (err) t->events_lost += 1;
}

/* Which thread ran at time `at` on this CPU. A task cannot be switched out while it keeps IRQs
 * off, so the thread running at the tick that IRQs delayed is the one holding them off. That is
 * the thread switched out by the first context switch after `at`, or the current thread when
 * none happened since. Returns 1 (and fills e->pid, e->comm) when it is not the current one;
 * when every remembered switch is after `at`, the thread is not known: pid 0 and an empty name
 * (user space says "unknown") rather than a wrong one. */
static __always_inline int thread_at(struct irqoff_cpu_state* st, __u64 at,
                                     struct irqoff_event* e) {
  __u32 count = st->switch_count;
  __s32 found = -1;
  __u32 newer = 0;
  bool older = false; /* a switch at or before `at` was seen: the walk is over */
  KPATH_UNROLL_FOR_OLD_KERNELS
  for (__u32 i = 0; i < IRQOFF_SWITCHES; i++) {
    __u32 idx = (count - 1 - i) & (IRQOFF_SWITCHES - 1); /* newest first */
    older = older || i >= count || st->switches[idx].ns <= at;
    if (!older) {
      found = (__s32)idx;
      newer++;
    }
  }
  if (found < 0 || found >= IRQOFF_SWITCHES) return 0;
  if (newer == IRQOFF_SWITCHES) {
    e->pid = 0;
    __builtin_memset(e->comm, 0, sizeof(e->comm));
    return 1;
  }
  e->pid = st->switches[found].prev_pid;
  __builtin_memcpy(e->comm, st->switches[found].prev_comm, sizeof(e->comm));
  return 1;
}

/* The software tick: a cpu-clock hrtimer interrupt every period_ns on this CPU. */
static __always_inline int on_tick(struct bpf_perf_event_data* ctx) {
  __u64 now = bpf_ktime_get_ns();
  __u32 zero = 0;
  __u32 cpu = bpf_get_smp_processor_id();
  __u32* generation = bpf_map_lookup_elem(&irqoff_cpu_generation, &cpu);
  struct irqoff_cpu_state* st = bpf_map_lookup_elem(&irqoff_cpu_state, &zero);
  struct irqoff_totals* t = bpf_map_lookup_elem(&irqoff_totals, &zero);
  struct irqoff_cpu_watch* w = bpf_map_lookup_elem(&irqoff_cpu_watch, &cpu);
  if (!generation || !st || !t || !w || *generation == 0) return 0;
  t->ticks += 1;

  /* Look at the next CPUs first: this tick may end in a region of its own. */
  KPATH_UNROLL_FOR_OLD_KERNELS
  for (__u32 i = 1; i <= IRQOFF_WITNESSES; i++) {
    if (i >= cpu_count) break;
    witness((cpu + i) % cpu_count, now);
  }

  learn_percpu_base(w);
  __u64 steal = read_steal_ns(w);
  __u64 prev_tick = st->last_tick_ns;
  __u64 prev_steal = st->last_steal_ns;
  st->last_tick_ns = now;
  st->last_steal_ns = steal;
  w->last_tick_ns = now;
  if (st->generation != *generation || prev_tick == 0) {
    st->generation = *generation;
    return 0;
  }
  /* The timer may not fire while the CPU idles (NO_HZ): measure from the end of idle. */
  __u64 base = prev_tick > w->idle_exit_ns ? prev_tick : w->idle_exit_ns;
  __u64 due = base + period_ns;
  /* A region ended at this tick; it began between the missed expiry and one period before it,
   * so its length is late + period/2 +- period/2. On time (nearly every tick): done. */
  /* Late by more than a period: remembered for the other CPUs' VM-pause rule. */
  if (now > due + period_ns) {
    w->late_due_ns = due;
    w->late_end_ns = now;
  }
  if (now + period_ns / 2 < due + threshold_ns) return 0;
  __u64 late = now - due;

  /* The tick interrupted the idle loop: IRQs are off around the halt by design. */
  if (w->in_idle || (__u32)bpf_get_current_pid_tgid() == 0) {
    t->late_idle += 1;
    return 0;
  }
  /* The vCPU was not running (preempted by the hypervisor) for `stolen` of the gap. */
  __u64 stolen = steal > prev_steal && prev_steal != 0 ? steal - prev_steal : 0;
  if (stolen > late) stolen = late;
  __u64 length = late - stolen + period_ns / 2;
  if (length < threshold_ns) {
    t->late_steal += 1;
    return 0;
  }
  /* What the witnesses saw while this tick was overdue (see witness()). */
  __u32 witnessed = w->watched_gap == prev_tick ? w->observations : 0;
  if (witnessed > 0 && w->host_preempted > 0) {
    t->late_host_preempted += 1;
    return 0;
  }
  /* Seen preemptible, so with IRQs on, meanwhile: a region lies between two such moments (or
   * the last tick and the first), and the rest of the lateness is the hypervisor's (a stall, a
   * long exit, or a pending interrupt delivered only at its next exit, after IRQs came on). */
  if (witnessed > 0 && w->irqs_on_ns > base) {
    __u64 held = w->longest_held_ns;
    if (w->holding && now - w->irqs_on_ns > held) held = now - w->irqs_on_ns;
    held = held > period_ns / 2 ? held - period_ns / 2 : 0;
    if (held < threshold_ns) {
      t->late_preemptible += 1;
      return 0;
    }
    if (held < length) length = held;
  }

  struct irqoff_event* e = bpf_map_lookup_elem(&irqoff_scratch, &zero);
  if (!e) return 0;
  /* Unwitnessed only where there are witnesses (per-CPU data found, and another CPU). */
  const bool can_witness = cpu_count > 1 && percpu_runqueues >= 0 && w->percpu_base != 0;
  e->flags = witnessed > 0 || !can_witness ? 0 : IRQOFF_EVENT_UNWITNESSED;
  /* Half a period after the missed expiry IRQs were still off (the region spans at least
   * threshold - period/2 >= 1.5 periods), and a tick delivered a little late by the hypervisor
   * does not move the blame to the thread that ran just before. */
  if (thread_at(st, due + period_ns / 2, e)) {
    /* The idle task ran when the tick was due: the CPU was idling, not holding IRQs off. */
    if (e->pid == 0 && e->comm[0] != 0) {
      t->late_idle += 1;
      return 0;
    }
    /* A pending reschedule IPI outranks the timer vector: when IRQs come back on, its return
     * path may switch tasks before the timer is taken, so the tick lands in the next thread. */
    e->flags |= IRQOFF_EVENT_TASK_SWITCHED;
  } else {
    e->pid = (__u32)bpf_get_current_pid_tgid();
    bpf_get_current_comm(e->comm, sizeof(e->comm));
  }
  /* The VM was paused: this CPU and its neighbours late together (witnessed or not: a witness that
   * looked just as the VM resumed saw each CPU where the pause froze it). */
  if (vm_pause_rule && neighbours_late_too(cpu, due, now)) {
    t->late_vm_pause += 1;
    return 0;
  }
  if (witnessed == 0 && can_witness) t->unwitnessed += 1;
  /* Kernel stack from the interrupted registers: where the delayed interrupt was delivered,
   * normally right where IRQs came back on. Empty when it was delivered to user code. */
  e->stack_size = bpf_get_stack(ctx, e->stack, sizeof(e->stack), 0);
  if (e->stack_size == 0) {
    e->flags |= IRQOFF_EVENT_USER_MODE;
    t->late_user += 1;
  }
  e->length_ns = length;
  e->late_ns = late;
  e->stolen_ns = stolen;
  e->end_ns = now;
  e->cpu = cpu;
  e->source = IRQOFF_SOURCE_SOFTWARE_TIMER;
  e->disable_site[0] = 0;
  e->disable_site[1] = 0;

  /* An NMI saw this region while IRQs were still off: its stack shows the holder itself. */
  struct irqoff_event* n = bpf_map_lookup_elem(&irqoff_nmi_stack, &zero);
  if (n && st->nmi_stack_for == prev_tick && n->stack_size > 0) {
    __builtin_memcpy(e->stack, n->stack, sizeof(e->stack));
    __builtin_memcpy(e->comm, n->comm, sizeof(e->comm));
    e->stack_size = n->stack_size;
    e->pid = n->pid;
    e->flags &= IRQOFF_EVENT_UNWITNESSED;
    e->source = IRQOFF_SOURCE_NMI;
  }

  count_region(t, length);
  emit(ctx, e, t);
  return 0;
}

SEC("perf_event")
int irqoff_tick(struct bpf_perf_event_data* ctx) { return on_tick(ctx); }

/* Hardware NMI sample (cycles): IRQs may be off right now. If the last software tick on this CPU
 * is older than a period plus half the threshold, IRQs have been off since about then: keep the
 * stack now, while the code holding them off is on it. The late tick that ends the region
 * measures it and picks this stack up. */
SEC("perf_event")
int irqoff_nmi(struct bpf_perf_event_data* ctx) {
  __u64 now = bpf_ktime_get_ns();
  __u32 zero = 0;
  __u32 cpu = bpf_get_smp_processor_id();
  __u32* generation = bpf_map_lookup_elem(&irqoff_cpu_generation, &cpu);
  struct irqoff_cpu_state* st = bpf_map_lookup_elem(&irqoff_cpu_state, &zero);
  struct irqoff_totals* t = bpf_map_lookup_elem(&irqoff_totals, &zero);
  struct irqoff_cpu_watch* w = bpf_map_lookup_elem(&irqoff_cpu_watch, &cpu);
  if (!generation || !st || !t || !w) return 0;
  t->nmis += 1;
  __u64 last_tick = st->last_tick_ns;
  if (st->generation != *generation || last_tick == 0 || w->in_idle) return 0;
  __u64 base = last_tick > w->idle_exit_ns ? last_tick : w->idle_exit_ns;
  if (now < base + period_ns + threshold_ns / 2) return 0;
  if (st->nmi_stack_for == last_tick) return 0; /* this region's stack is already kept */
  struct irqoff_event* n = bpf_map_lookup_elem(&irqoff_nmi_stack, &zero);
  if (!n) return 0;
  n->stack_size = bpf_get_stack(ctx, n->stack, sizeof(n->stack), 0);
  if (n->stack_size <= 0) return 0; /* user code: IRQs are on there */
  n->pid = (__u32)bpf_get_current_pid_tgid();
  bpf_get_current_comm(n->comm, sizeof(n->comm));
  st->nmi_stack_for = last_tick;
  return 0;
}

/* power:cpu_idle(state, cpu_id): state is (u32)-1 (PWR_EVENT_EXIT) when leaving idle. Every idle
 * path (cpuidle drivers, default_idle_call, polling) reports both edges. */
static __always_inline void on_cpu_idle(__u32 state) {
  __u32 cpu = bpf_get_smp_processor_id();
  struct irqoff_cpu_watch* w = bpf_map_lookup_elem(&irqoff_cpu_watch, &cpu);
  if (!w) return;
  if (state == (__u32)-1) {
    w->in_idle = 0;
    w->idle_exit_ns = bpf_ktime_get_ns();
  } else {
    w->in_idle = 1;
  }
}

SEC("raw_tp/cpu_idle")
int BPF_PROG(irqoff_cpu_idle_raw_tp, unsigned int state) {
  on_cpu_idle(state);
  return 0;
}

/* sched:sched_switch: remember who was switched out, and when (see thread_at). Runs with IRQs
 * off inside the scheduler, so the tick never sees a half-written slot. */
KPATH_TUNABLE(__u32, tp_prev_comm_offset, 0);
KPATH_TUNABLE(__u32, tp_prev_pid_offset, 0);

static __always_inline struct irqoff_switch* next_switch(struct irqoff_cpu_state** state) {
  __u32 zero = 0;
  struct irqoff_cpu_state* st = bpf_map_lookup_elem(&irqoff_cpu_state, &zero);
  if (!st) return 0;
  *state = st;
  return &st->switches[st->switch_count & (IRQOFF_SWITCHES - 1)];
}

/* Where task_struct keeps pid and comm, from vmlinux BTF in user space: read through these
 * offsets rather than CO-RE, so this object carries no CO-RE relocation and its tracepoint and
 * perf-event programs load on kernels without BTF too. */
KPATH_TUNABLE(__u32, task_pid_offset, 0);
KPATH_TUNABLE(__u32, task_comm_offset, 0);

SEC("tp_btf/sched_switch")
int BPF_PROG(irqoff_sched_switch_tp_btf, bool preempt, struct task_struct* prev) {
  struct irqoff_cpu_state* st = 0;
  struct irqoff_switch* sw = next_switch(&st);
  if (!sw || !st) return 0;
  sw->ns = bpf_ktime_get_ns();
  bpf_probe_read_kernel(&sw->prev_pid, sizeof(sw->prev_pid), (char*)prev + task_pid_offset);
  bpf_probe_read_kernel(sw->prev_comm, sizeof(sw->prev_comm), (char*)prev + task_comm_offset);
  st->switch_count += 1;
  return 0;
}

/* Classic tracepoint (kernels without BTF): prev_comm and prev_pid at offsets from the format. */
SEC("tp/sched/sched_switch")
int irqoff_sched_switch_tracepoint(void* ctx) {
  struct irqoff_cpu_state* st = 0;
  struct irqoff_switch* sw = next_switch(&st);
  if (!sw || !st || tp_prev_comm_offset > 4096 || tp_prev_pid_offset > 4096) return 0;
  sw->ns = bpf_ktime_get_ns();
  sw->prev_pid = (__u32)kpath_tp_field(ctx, tp_prev_pid_offset, sizeof(__u32));
  bpf_probe_read_kernel(sw->prev_comm, sizeof(sw->prev_comm), (char*)ctx + tp_prev_comm_offset);
  st->switch_count += 1;
  return 0;
}

/* --- preemptirq tracepoints ---------------------------------------------------------------- */

static __always_inline void on_irq_disable(__u64 ip, __u64 parent_ip) {
  __u32 zero = 0;
  struct irqoff_cpu_state* st = bpf_map_lookup_elem(&irqoff_cpu_state, &zero);
  if (!st) return;
  st->irqs_off_since = bpf_ktime_get_ns();
  st->disable_site[0] = ip;
  st->disable_site[1] = parent_ip;
}

static __always_inline void on_irq_enable(void* ctx) {
  __u32 zero = 0;
  struct irqoff_cpu_state* st = bpf_map_lookup_elem(&irqoff_cpu_state, &zero);
  if (!st || st->irqs_off_since == 0) return;
  __u64 now = bpf_ktime_get_ns();
  __u64 since = st->irqs_off_since;
  st->irqs_off_since = 0;
  if (now < since + threshold_ns) return;
  struct irqoff_totals* t = bpf_map_lookup_elem(&irqoff_totals, &zero);
  if (!t) return;
  /* The idle loop keeps IRQs off around the halt by design. */
  __u32 cpu = bpf_get_smp_processor_id();
  struct irqoff_cpu_watch* w = bpf_map_lookup_elem(&irqoff_cpu_watch, &cpu);
  if (!w || w->in_idle || w->idle_exit_ns > since) {
    t->late_idle += 1;
    return;
  }
  struct irqoff_event* e = bpf_map_lookup_elem(&irqoff_scratch, &zero);
  if (!e) return;
  e->stack_size = bpf_get_stack(ctx, e->stack, sizeof(e->stack), 0);
  e->length_ns = now - since;
  e->late_ns = 0;
  e->stolen_ns = 0;
  e->end_ns = now;
  e->cpu = cpu;
  e->pid = (__u32)bpf_get_current_pid_tgid();
  e->source = IRQOFF_SOURCE_PREEMPTIRQ;
  e->flags = 0;
  e->disable_site[0] = st->disable_site[0];
  e->disable_site[1] = st->disable_site[1];
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  count_region(t, e->length_ns);
  emit(ctx, e, t);
}

SEC("tp_btf/irq_disable")
int BPF_PROG(irqoff_disable_tp_btf, unsigned long ip, unsigned long parent_ip) {
  on_irq_disable(ip, parent_ip);
  return 0;
}

SEC("tp_btf/irq_enable")
int BPF_PROG(irqoff_enable_tp_btf, unsigned long ip, unsigned long parent_ip) {
  on_irq_enable(ctx);
  return 0;
}

SEC("raw_tp/irq_disable")
int BPF_PROG(irqoff_disable_raw_tp, unsigned long ip, unsigned long parent_ip) {
  on_irq_disable(ip, parent_ip);
  return 0;
}

SEC("raw_tp/irq_enable")
int BPF_PROG(irqoff_enable_raw_tp, unsigned long ip, unsigned long parent_ip) {
  on_irq_enable(ctx);
  return 0;
}

/* Classic tracepoints record s32 offsets from _stext (caller_offs, parent_offs). */
static __always_inline __u64 tp_site(void* ctx, __u32 offset, __u32 size) {
  __s32 offs = (__s32)kpath_tp_field(ctx, offset, size);
  return stext + (__s64)offs;
}

SEC("tp/preemptirq/irq_disable")
int irqoff_disable_tracepoint(void* ctx) {
  on_irq_disable(tp_site(ctx, tp_caller_offset, tp_caller_size),
                 tp_site(ctx, tp_parent_offset, tp_parent_size));
  return 0;
}

SEC("tp/preemptirq/irq_enable")
int irqoff_enable_tracepoint(void* ctx) {
  on_irq_enable(ctx);
  return 0;
}
