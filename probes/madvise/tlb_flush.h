/* Types shared between tlb_flush.bpf.c and the user-space probe. Fixed-width types only. */
#ifndef KPATH_TLB_FLUSH_H
#define KPATH_TLB_FLUSH_H

/* Slots of the per-CPU array `tlb_flushes`, one per enum tlb_flush_reason value of x86
 * (include/linux/mm_types.h), and one for any value beyond them. */
enum tlb_flush_slot {
  TLB_FLUSH_SLOT_TASK_SWITCH = 0,    /* TLB_FLUSH_ON_TASK_SWITCH */
  TLB_FLUSH_SLOT_REMOTE_SHOOTDOWN,   /* TLB_REMOTE_SHOOTDOWN: an IPI from another CPU */
  TLB_FLUSH_SLOT_LOCAL_SHOOTDOWN,    /* TLB_LOCAL_SHOOTDOWN */
  TLB_FLUSH_SLOT_LOCAL_MM_SHOOTDOWN, /* TLB_LOCAL_MM_SHOOTDOWN */
  TLB_FLUSH_SLOT_REMOTE_SEND_IPI,    /* TLB_REMOTE_SEND_IPI: this CPU asked others to flush */
  TLB_FLUSH_SLOT_REMOTE_WRONG_CPU,   /* TLB_REMOTE_WRONG_CPU */
  TLB_FLUSH_SLOT_OTHER,
  TLB_FLUSH_SLOTS,
};

#endif
