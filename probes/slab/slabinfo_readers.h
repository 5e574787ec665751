/* Types shared between slabinfo_readers.bpf.c and the user-space probe. Fixed-width types only. */
#ifndef KPATH_SLABINFO_READERS_H
#define KPATH_SLABINFO_READERS_H

/* Keyed counters (KPATH_KEYED_COUNTERS slabinfo_reads): opens of /proc/slabinfo by process. */
struct slabinfo_reader_key {
  char comm[16];
};

struct slabinfo_reader_value {
  __u64 opens;
};

/* Per-CPU counters (array map `slabinfo_events`). */
enum slabinfo_event {
  SLABINFO_EVENT_SELF_OPEN = 0, /* kpathd's own open (its canary): seen, not counted as a reader */
  SLABINFO_EVENT_MAX,
};

#endif
