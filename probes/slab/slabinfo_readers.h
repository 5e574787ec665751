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

#endif
