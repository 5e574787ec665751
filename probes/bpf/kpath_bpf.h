/* Shared by every kpathd BPF program: includes and small helpers. Kernel differences are handled
 * by choosing among programs in user space (bpf_program__set_autoload) after asking the kernel,
 * never by version checks. */
#ifndef KPATH_BPF_H
#define KPATH_BPF_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* The first argument of a kprobed function, read from pt_regs without CO-RE: vmlinux.h's
 * struct pt_regs carries preserve_access_index, and a single CO-RE relocation makes libbpf demand
 * kernel BTF for the whole object, so even its tracepoint programs would not load on a kernel
 * without BTF. The register layout is each architecture's user ABI (asm/ptrace.h); these structs
 * come after vmlinux.h's attribute pragma and are plain C. */
#if defined(__TARGET_ARCH_x86)
struct kpath_user_regs {
  unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di;
};
#define KPATH_KPROBE_ARG1(ctx) (((const struct kpath_user_regs*)(ctx))->di)
#elif defined(__TARGET_ARCH_arm64)
struct kpath_user_regs {
  unsigned long regs[31];
};
#define KPATH_KPROBE_ARG1(ctx) (((const struct kpath_user_regs*)(ctx))->regs[0])
#else
#error "kpathd BPF: unsupported architecture"
#endif

/* Reads a classic-tracepoint field at an offset learnt from the event's format file at start, so
 * the same program serves every kernel's layout, with or without BTF. */
static __always_inline __u64 kpath_tp_field(void* ctx, __u32 offset, __u32 size) {
  __u64 v = 0;
  if (size > sizeof(v) || offset > 4096) return 0;
  bpf_probe_read_kernel(&v, size & 0xf, (char*)ctx + offset);
  return v;
}

/* Keyed counters, double-buffered so that user space can drain them exactly.
 *
 *   KPATH_KEYED_COUNTERS(name, struct my_key, struct my_value, 1024)
 *
 * defines two per-CPU hashes name##_0 and name##_1, an array name##_active (1 entry) naming the
 * one programs write into, a per-CPU array name##_overflow (2 entries, one per buffer) that takes
 * the counts of keys that found the active hash full, and name##_slot(&key), which returns the
 * current CPU's value slot for the key (or the overflow slot; NULL only if every lookup failed).
 * The value struct holds __u64 fields only. User space (probes/collect/keyed_counter_maps.h) flips
 * name##_active each interval and drains and empties the other hash: hot paths do O(1) work on
 * per-CPU memory, maps stay small, and nothing is lost when keys are many: overflow is exported as
 * "other". */
#define KPATH_KEYED_COUNTERS(name, key_t, value_t, entries)                   \
  struct {                                                                    \
    __uint(type, BPF_MAP_TYPE_PERCPU_HASH);                                   \
    __uint(max_entries, entries);                                             \
    __type(key, key_t);                                                       \
    __type(value, value_t);                                                   \
  } name##_0 SEC(".maps"), name##_1 SEC(".maps");                             \
  struct {                                                                    \
    __uint(type, BPF_MAP_TYPE_ARRAY);                                         \
    __uint(max_entries, 1);                                                   \
    __type(key, __u32);                                                       \
    __type(value, __u32);                                                     \
  } name##_active SEC(".maps");                                               \
  struct {                                                                    \
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                  \
    __uint(max_entries, 2);                                                   \
    __type(key, __u32);                                                       \
    __type(value, value_t);                                                   \
  } name##_overflow SEC(".maps");                                             \
  static __always_inline value_t* name##_slot(const key_t* key) {             \
    value_t zero_value; /* on the stack: global data needs Linux 5.2 */       \
    __builtin_memset(&zero_value, 0, sizeof(zero_value));                     \
    __u32 zero = 0;                                                           \
    __u32* active = bpf_map_lookup_elem(&name##_active, &zero);               \
    value_t* v;                                                               \
    /* One branch per map: the verifier needs a constant map at each call. */ \
    if (active && *active) {                                                  \
      v = bpf_map_lookup_elem(&name##_1, key);                                \
      if (!v) {                                                               \
        bpf_map_update_elem(&name##_1, key, &zero_value, BPF_NOEXIST);        \
        v = bpf_map_lookup_elem(&name##_1, key);                              \
      }                                                                       \
    } else {                                                                  \
      v = bpf_map_lookup_elem(&name##_0, key);                                \
      if (!v) {                                                               \
        bpf_map_update_elem(&name##_0, key, &zero_value, BPF_NOEXIST);        \
        v = bpf_map_lookup_elem(&name##_0, key);                              \
      }                                                                       \
    }                                                                         \
    if (v) return v;                                                          \
    __u32 buffer = (active && *active) ? 1 : 0;                               \
    return bpf_map_lookup_elem(&name##_overflow, &buffer);                    \
  }

#endif /* KPATH_BPF_H */
