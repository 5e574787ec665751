// SPDX-License-Identifier: GPL-2.0
/* Who opens /proc/slabinfo (seed 001: `ss` reading it stalled a CPU with IRQs off). User space
 * enables one way of seeing it, best first:
 *  - fentry or kprobe on slabinfo_open, the file's open method: every open, however the path
 *    was spelled, and nothing else;
 *  - the openat/open/openat2 syscall tracepoints with an in-kernel check of the path: they run
 *    on every open of any file, so the check is one 15-byte user read and two 64-bit compares,
 *    and only the absolute spelling "/proc/slabinfo" is recognised.
 * No CO-RE relocation: the object loads on kernels without BTF (the fentry program, which needs
 * BTF, is then simply not loaded). */
/* kpath_bpf.h (vmlinux.h) first: the shared header uses its types. */
// clang-format off
#include "kpath_bpf.h"
#include "slabinfo_readers.h"
// clang-format on

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
KPATH_TUNABLE(__u32, self_tgid, 0); /* kpathd's own reads are not counted */
/* kpathd's pid namespace for kpath_current_is_self (0: the initial one's ids). */
KPATH_TUNABLE(__u64, self_pidns_dev, 0);
KPATH_TUNABLE(__u64, self_pidns_ino, 0);

KPATH_KEYED_COUNTERS(slabinfo_reads, struct slabinfo_reader_key, struct slabinfo_reader_value, 1024)

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, SLABINFO_EVENT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} slabinfo_events SEC(".maps");

static __always_inline void count_reader(void) {
  if (kpath_current_is_self((__s32)self_tgid, self_pidns_dev, self_pidns_ino)) {
    /* kpathd's own open, its canary (SlabinfoReadersProbe::SelfTest): seen, not a reader. */
    __u32 key = SLABINFO_EVENT_SELF_OPEN;
    __u64* n = bpf_map_lookup_elem(&slabinfo_events, &key);
    if (n) *n += 1;
    return;
  }
  struct slabinfo_reader_key key;
  __builtin_memset(&key, 0, sizeof(key));
  bpf_get_current_comm(key.comm, sizeof(key.comm));
  struct slabinfo_reader_value* v = slabinfo_reads_slot(&key);
  if (v) v->opens += 1;
}

/* Little-endian words of "/proc/slabinfo\0" (x86_64 and arm64 are little-endian). */
#define KPATH_LE64(a, b, c, d, e, f, g, h)                                                 \
  ((__u64)(a) | (__u64)(b) << 8 | (__u64)(c) << 16 | (__u64)(d) << 24 | (__u64)(e) << 32 | \
   (__u64)(f) << 40 | (__u64)(g) << 48 | (__u64)(h) << 56)
#define SLABINFO_PATH_HEAD KPATH_LE64('/', 'p', 'r', 'o', 'c', '/', 's', 'l')
#define SLABINFO_PATH_TAIL KPATH_LE64('a', 'b', 'i', 'n', 'f', 'o', 0, 0)

/* Opens whose path could not be read at syscall entry (a page the process has not touched
 * yet: the kernel's own copy of the path is made later, and a tracepoint cannot fault the page
 * in). They may include opens of /proc/slabinfo: exported as lost events. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} slabinfo_unreadable SEC(".maps");

static __always_inline void check_path(const char* path) {
  __u64 words[2] = {0, 0};
  /* Exactly the 15 bytes of the name and its NUL: reading more could fail near the end of a
   * mapping for the right name; a shorter name then fails the compare below. */
  if (bpf_probe_read_user(words, 15, path) != 0) {
    /* Not mapped yet, or a name shorter than 15 bytes at the very end of a mapping. */
    __u32 zero = 0;
    __u64* unreadable = bpf_map_lookup_elem(&slabinfo_unreadable, &zero);
    if (unreadable) *unreadable += 1;
    return;
  }
  if (words[0] != SLABINFO_PATH_HEAD || words[1] != SLABINFO_PATH_TAIL) return;
  count_reader();
}

SEC("fentry/slabinfo_open")
int BPF_PROG(slabinfo_open_fentry) {
  count_reader();
  return 0;
}

SEC("kprobe/slabinfo_open")
int BPF_KPROBE(slabinfo_open_kprobe) {
  count_reader();
  return 0;
}

/* The record of every syscalls:sys_enter_* event (struct syscall_trace_enter): the common
 * header, the syscall number, then each argument in an unsigned long. Read directly, no helper
 * call: user space attaches these programs only after checking the format files' offsets. */
struct syscall_enter_record {
  __u64 common;
  __s64 nr;
  __u64 args[6];
};

SEC("tp/syscalls/sys_enter_openat")
int slabinfo_openat_tracepoint(struct syscall_enter_record* ctx) {
  check_path((const char*)ctx->args[1]); /* openat(dfd, filename, flags, mode) */
  return 0;
}

SEC("tp/syscalls/sys_enter_open")
int slabinfo_open_tracepoint(struct syscall_enter_record* ctx) {
  check_path((const char*)ctx->args[0]); /* open(filename, flags, mode) */
  return 0;
}

SEC("tp/syscalls/sys_enter_openat2")
int slabinfo_openat2_tracepoint(struct syscall_enter_record* ctx) {
  check_path((const char*)ctx->args[1]); /* openat2(dfd, filename, how, usize) */
  return 0;
}
