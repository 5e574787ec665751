/* Shared by every kpathd BPF program: includes and small helpers. Kernel differences are handled
 * by choosing among programs in user space (bpf_program__set_autoload) after asking the kernel,
 * never by version checks. */
#ifndef KPATH_BPF_H
#define KPATH_BPF_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "kpath_owner.h"

/* Tunables: each object's settings are `const volatile` globals in .rodata, declared with
 *
 *   KPATH_TUNABLE(__u32, threshold, 10);
 *
 * and set by user space between open and load (skel->rodata->threshold). From Linux 5.2 the
 * verifier reads a frozen .rodata as constants and never checks a branch they rule out, which
 * is how one object serves kernels with and without BTF, the ring buffer, BPF atomics...
 * Kernels without global data (4.19: seed 002's fleet) cannot create .rodata at all, so each
 * object that must load there has a second build, KPATH_NO_GLOBAL_DATA (cmake/BpfSkeleton.cmake):
 * the globals are renamed <name>__rodata (so the skeleton keeps its .rodata and layout, which
 * user space still fills, but no program refers to it: libbpf does not create it there), and
 * every use of <name> reads the field of the same name from the one value of the array map
 * `kpath_tunables`, which user space fills from that .rodata after load
 * (probes/collect/bpf_skeleton.h). The header that does so is made from the KPATH_TUNABLE
 * declarations by cmake/bpf_tunables.sh. Reads cost an array lookup (inlined by the verifier)
 * on those kernels only; the default build is unchanged. The branches the values used to rule
 * out are checked there, so code for newer kernels (BTF task reads, the ring buffer, atomics
 * with a result) is compiled out of that build with #ifndef KPATH_NO_GLOBAL_DATA. */
/* KPATH_TUNABLE_ARRAY(type, name, count) declares an array of `count` tunables (all 0 until
 * user space sets them). Its map field is filled as a scalar's, but the KPATH_NO_GLOBAL_DATA build
 * has no `name` to read it by: code that reads one is compiled out of that build. */
#if defined(KPATH_TUNABLES_SCAN)
/* The markers cmake/bpf_tunables.sh reads, kept on one line: */
/* clang-format off */
#define KPATH_TUNABLE(type, name, value) KPATH_TUNABLE_SCAN: type | name | :KPATH_TUNABLE_END
#define KPATH_TUNABLE_ARRAY(type, name, count) KPATH_TUNABLE_SCAN: type | name | [count] :KPATH_TUNABLE_END
/* clang-format on */
#elif defined(KPATH_NO_GLOBAL_DATA)
#define KPATH_TUNABLE(type, name, value) const volatile type name##__rodata = value
#define KPATH_TUNABLE_ARRAY(type, name, count) const volatile type name##__rodata[count] = {}
#else
#define KPATH_TUNABLE(type, name, value) const volatile type name = value
#define KPATH_TUNABLE_ARRAY(type, name, count) const volatile type name[count] = {}
#endif

/* Before a loop with a constant trip count that the default build leaves as a loop (bounded
 * loops, Linux 5.3+): unrolled in the KPATH_NO_GLOBAL_DATA build, for verifiers that refuse
 * every back-edge. */
#ifdef KPATH_NO_GLOBAL_DATA
#define KPATH_UNROLL_FOR_OLD_KERNELS _Pragma("unroll")
#else
#define KPATH_UNROLL_FOR_OLD_KERNELS
#endif

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
  if (size == 0 || size > sizeof(v) || offset > 4096) return 0;
  /* Always 8 bytes, then the field's low `size` bytes kept (x86_64 and arm64 are little-endian):
   * a read of a variable length is refused by verifiers that cannot bound it, as 4.19's with the
   * length from the tunables map ("R2 unbounded memory access"); bytes read past the record's
   * end are masked away. */
  bpf_probe_read_kernel(&v, sizeof(v), (char*)ctx + offset);
  if (size < sizeof(v)) v &= (1ULL << (size * 8)) - 1;
  return v;
}

/* Bits 7, 15, ... 63 of the result flag the zero bytes of `w`; the lowest flag is exact (the
 * has-zero-byte test: a borrow can only flag bytes above a real zero byte). */
static __always_inline __u64 kpath_zero_bytes(__u64 w) {
  return (w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL;
}

/* The bytes of little-endian word `w` before its first zero byte, given kpath_zero_bytes(w) != 0
 * (x86_64 and arm64, the architectures kpathd builds for, are little-endian). */
static __always_inline __u64 kpath_before_nul(__u64 w, __u64 zero_bytes) {
  return w & (((zero_bytes & -zero_bytes) >> 7) - 1);
}

/* The current task's comm (16 bytes, NUL-padded) into `comm`. With `task_comm_offset`
 * (task_struct.comm's offset, which user space takes from vmlinux BTF): two loads from `task`,
 * the current task (bpf_get_current_task_btf, Linux 5.11+), and the bytes after the NUL
 * cleared, since kernels that copy comms with strlcpy leave a longer former name's bytes there.
 * Without (0): bpf_get_current_comm, a helper call and a string copy, 30-40 ns more per event on
 * the development VM, whose return thunks make every call costly. The offset is a constant to
 * the verifier, which never looks at the branch not taken: an object using this still loads on
 * kernels without BTF (offset 0, and `task` then unused). */
static __always_inline void kpath_task_comm(char* comm, const char* task, __u32 task_comm_offset) {
#ifndef KPATH_NO_GLOBAL_DATA
  if (task_comm_offset) {
    const __u64* words = (const __u64*)(task + task_comm_offset);
    __u64 copy[2] = {words[0], words[1]};
    __u64 zero = kpath_zero_bytes(copy[0]);
    if (zero) {
      copy[0] = kpath_before_nul(copy[0], zero);
      copy[1] = 0;
    } else {
      zero = kpath_zero_bytes(copy[1]);
      if (zero) copy[1] = kpath_before_nul(copy[1], zero);
    }
    __builtin_memcpy(comm, copy, sizeof(copy));
    return;
  }
#endif
  bpf_get_current_comm(comm, 16);
}

/* The current task, for kpath_task_comm and other reads at BTF offsets (NULL without them). */
static __always_inline const char* kpath_current_task(__u32 task_comm_offset) {
#ifdef KPATH_NO_GLOBAL_DATA
  return NULL; /* no bpf_get_current_task_btf (5.11) */
#else
  return task_comm_offset ? (const char*)bpf_get_current_task_btf() : NULL;
#endif
}

static __always_inline void kpath_current_comm(char* comm, __u32 task_comm_offset) {
  kpath_task_comm(comm, kpath_current_task(task_comm_offset), task_comm_offset);
}

/* A key's owner for the pod labels (enum kpath_owner_kind, kpath_owner.h): `kind` is a
 * tunable, so the branches not taken are never checked by the verifier. */
static __always_inline __u64 kpath_current_owner(__u32 kind) {
  if (kind == KPATH_OWNER_CGROUP_ID) return bpf_get_current_cgroup_id();
  if (kind == KPATH_OWNER_TGID) return bpf_get_current_pid_tgid() >> 32;
  return 0;
}

/* Whether the current task belongs to kpathd, whose process id in its own pid namespace is
 * `self_tgid`: where user space found bpf_get_ns_current_pid_tgid (Linux 5.7+), it sets that
 * namespace's nsfs device and inode (a container's kpathd sees other ids than the kernel's
 * initial namespace); else (0) the initial namespace's id is compared. A helper call: for rare
 * paths only. The branch not taken is never checked by the verifier (constants). */
static __always_inline bool kpath_current_is_self(__s32 self_tgid, __u64 pidns_dev,
                                                  __u64 pidns_ino) {
#ifndef KPATH_NO_GLOBAL_DATA /* no bpf_get_ns_current_pid_tgid (5.7) */
  if (pidns_ino) {
    /* UAPI's struct bpf_pidns_info, declared here: vmlinux.h's copy carries
     * preserve_access_index, and a CO-RE relocation would keep the object off kernels without
     * BTF (the ABI layout is fixed). */
    struct {
      __u32 pid;
      __u32 tgid;
    } ns = {};
    if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, (void*)&ns, sizeof(ns)) != 0)
      return false;
    return (__s32)ns.tgid == self_tgid;
  }
#endif
  return (__s32)(bpf_get_current_pid_tgid() >> 32) == self_tgid;
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
 * "other". name##_buffer() and name##_slot_in(buffer, &key, &created) split name##_slot for
 * callers that need the buffer or to know that the key is new in it. */
#define KPATH_KEYED_COUNTERS(name, key_t, value_t, entries)                                       \
  struct {                                                                                        \
    __uint(type, BPF_MAP_TYPE_PERCPU_HASH);                                                       \
    __uint(max_entries, entries);                                                                 \
    __type(key, key_t);                                                                           \
    __type(value, value_t);                                                                       \
  } name##_0 SEC(".maps"), name##_1 SEC(".maps");                                                 \
  struct {                                                                                        \
    __uint(type, BPF_MAP_TYPE_ARRAY);                                                             \
    __uint(max_entries, 1);                                                                       \
    __type(key, __u32);                                                                           \
    __type(value, __u32);                                                                         \
  } name##_active SEC(".maps");                                                                   \
  struct {                                                                                        \
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                                      \
    __uint(max_entries, 2);                                                                       \
    __type(key, __u32);                                                                           \
    __type(value, value_t);                                                                       \
  } name##_overflow SEC(".maps");                                                                 \
  static __always_inline __u32 name##_buffer(void) {                                              \
    __u32 zero = 0;                                                                               \
    __u32* active = bpf_map_lookup_elem(&name##_active, &zero);                                   \
    return (active && *active) ? 1 : 0;                                                           \
  }                                                                                               \
  /* *created is set when this call made the key's entry in the buffer. */                        \
  static __always_inline value_t* name##_slot_in(__u32 buffer, const key_t* key, bool* created) { \
    value_t zero_value; /* on the stack: global data needs Linux 5.2 */                           \
    __builtin_memset(&zero_value, 0, sizeof(zero_value));                                         \
    value_t* v;                                                                                   \
    /* One branch per map: the verifier needs a constant map at each call. */                     \
    if (buffer) {                                                                                 \
      v = bpf_map_lookup_elem(&name##_1, key);                                                    \
      if (!v) {                                                                                   \
        *created = bpf_map_update_elem(&name##_1, key, &zero_value, BPF_NOEXIST) == 0;            \
        v = bpf_map_lookup_elem(&name##_1, key);                                                  \
      }                                                                                           \
    } else {                                                                                      \
      v = bpf_map_lookup_elem(&name##_0, key);                                                    \
      if (!v) {                                                                                   \
        *created = bpf_map_update_elem(&name##_0, key, &zero_value, BPF_NOEXIST) == 0;            \
        v = bpf_map_lookup_elem(&name##_0, key);                                                  \
      }                                                                                           \
    }                                                                                             \
    if (v) return v;                                                                              \
    return bpf_map_lookup_elem(&name##_overflow, &buffer);                                        \
  }                                                                                               \
  static __always_inline value_t* name##_slot(const key_t* key) {                                 \
    bool created = false;                                                                         \
    return name##_slot_in(name##_buffer(), key, &created);                                        \
  }

/* Ablations: parts of the programs cut out at build time to measure what each costs on a live
 * hook (cmake -DKPATH_BPF_ABLATION=<bits>, built and compared by bench/bpf_cost_ab.py --ablate).
 * 0, nothing cut, in every real build; an ablated build counts wrong by design. */
#ifndef KPATH_ABLATION
#define KPATH_ABLATION 0
#endif
#define KPATH_ABLATE_RETURN 1 /* the program returns once it has read the event's arguments */
#define KPATH_ABLATE_COUNT 2  /* no counting by key (comm and caller, comm and unit) */
#define KPATH_ABLATE_TRACK 4  /* percpu: no live-allocation table; cgroups: no path tail sent */
/* percpu allocation log, its order stamp (allocation_log.h) replaced, to measure what it costs:
 * none at all (order), bpf_ktime_get_ns() (clock), bpf_jiffies64() (jiffies). Not exact. */
#define KPATH_ABLATE_ORDER 8
#define KPATH_ABLATE_CLOCK 16
#define KPATH_ABLATE_JIFFIES 32
/* cgroups, with COUNT cut: parts of the unique-name path kept, to find its floor */
#define KPATH_ABLATE_KEEP_NAME 64   /* the cgroup's name read (64 bytes) */
#define KPATH_ABLATE_KEEP_SHAPE 128 /* the name read and its shape hashed */
#define KPATH_ABLATE_KEEP_SLOT 256  /* one per-CPU array slot counted by the key or shape */
#define KPATH_ABLATED(part) ((KPATH_ABLATION & KPATH_ABLATE_##part) != 0)
/* Keeps `value` computed in an ablated program (a store the compiler cannot drop). */
static __always_inline void kpath_ablation_sink(__u64 value) {
  volatile __u64 sink = value;
  (void)sink;
}

/* A multiplier with well-mixed bits (2^64 / golden ratio) for cheap multiplicative hashing:
 * the top bits of word * KPATH_HASH_MUL index a power-of-two table. */
#define KPATH_HASH_MUL 0x9e3779b97f4a7c15ULL

/* Keyed counters with a per-CPU direct-mapped cache in front of the hash (see
 * KPATH_KEYED_COUNTERS, whose maps and functions it also defines):
 *
 *   KPATH_CACHED_KEYED_COUNTERS(name, struct my_key, struct my_value, 1024)
 *
 * adds name##_cache, a per-CPU array of two elements, one per buffer, each an array of
 * KPATH_COUNTER_CACHE_SLOTS entries {used, value, key} (so that a lookup is one pointer for all
 * the entries, not one each), name##_cached_slot(buffer, &key, &created), and
 * name##_cache_find(buffer, &key), which only looks (for callers with a cheaper key to try). A
 * key is hashed with a multiply per 8-byte word into one entry of the current CPU's cache for
 * that buffer: an empty entry is claimed, an entry holding the key is counted into, and only an
 * entry holding another key sends the count on to the hash. A cache lookup costs a few
 * instructions where the hash costs a jhash, a bucket walk and a key compare, so a key that
 * keeps its entry (the usual case: few keys per CPU per interval) never touches the hash. Exact:
 * user space drains the cache of the buffer it drains, summing entries of the same key across
 * CPUs and with the hash, and empties it. Keys are whole __u64 words, zeroed padding included. */
#define KPATH_COUNTER_CACHE_BITS 7
#define KPATH_COUNTER_CACHE_SLOTS (1 << KPATH_COUNTER_CACHE_BITS)
#define KPATH_CACHED_KEYED_COUNTERS(name, key_t, value_t, entries)                            \
  KPATH_KEYED_COUNTERS(name, key_t, value_t, entries)                                         \
  _Static_assert(sizeof(key_t) % 8 == 0, #key_t " must be whole __u64 words");                \
  struct name##_cache_entry {                                                                 \
    __u64 used; /* 0: empty */                                                                \
    value_t value;                                                                            \
    key_t key;                                                                                \
  };                                                                                          \
  struct name##_cache {                                                                       \
    struct name##_cache_entry slot[KPATH_COUNTER_CACHE_SLOTS];                                \
  };                                                                                          \
  struct {                                                                                    \
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                                  \
    __uint(max_entries, 2);                                                                   \
    __type(key, __u32);                                                                       \
    __type(value, struct name##_cache);                                                       \
  } name##_cache SEC(".maps");                                                                \
  /* The current CPU's cache entry for `key` in `buffer` (NULL only if the lookup failed). */ \
  static __always_inline struct name##_cache_entry* name##_cache_entry_of(__u32 buffer,       \
                                                                          const key_t* key) { \
    const __u64* words = (const __u64*)key;                                                   \
    __u64 hash = 0;                                                                           \
    _Pragma("unroll") for (int i = 0; i < (int)(sizeof(key_t) / 8); i++) {                    \
      hash = (hash ^ words[i]) * KPATH_HASH_MUL;                                              \
    }                                                                                         \
    struct name##_cache* cache = bpf_map_lookup_elem(&name##_cache, &buffer);                 \
    if (!cache) return NULL;                                                                  \
    return &cache->slot[(hash >> (64 - KPATH_COUNTER_CACHE_BITS)) &                           \
                        (KPATH_COUNTER_CACHE_SLOTS - 1)];                                     \
  }                                                                                           \
  static __always_inline bool name##_cache_holds(const struct name##_cache_entry* e,          \
                                                 const key_t* key) {                          \
    const __u64* held = (const __u64*)&e->key;                                                \
    const __u64* words = (const __u64*)key;                                                   \
    __u64 differ = 0;                                                                         \
    _Pragma("unroll") for (int i = 0; i < (int)(sizeof(key_t) / 8); i++) {                    \
      differ |= held[i] ^ words[i];                                                           \
    }                                                                                         \
    return e->used && !differ;                                                                \
  }                                                                                           \
  /* The key's counters if the cache holds them, else NULL (nothing claimed or created). */   \
  static __always_inline value_t* name##_cache_find(__u32 buffer, const key_t* key) {         \
    struct name##_cache_entry* e = name##_cache_entry_of(buffer, key);                        \
    return e && name##_cache_holds(e, key) ? &e->value : NULL;                                \
  }                                                                                           \
  static __always_inline value_t* name##_cached_slot(__u32 buffer, const key_t* key,          \
                                                     bool* created) {                         \
    struct name##_cache_entry* e = name##_cache_entry_of(buffer, key);                        \
    if (e) {                                                                                  \
      if (!e->used) {                                                                         \
        __builtin_memset(&e->value, 0, sizeof(e->value));                                     \
        e->key = *key;                                                                        \
        e->used = 1;                                                                          \
        *created = true;                                                                      \
        return &e->value;                                                                     \
      }                                                                                       \
      if (name##_cache_holds(e, key)) return &e->value;                                       \
    }                                                                                         \
    return name##_slot_in(buffer, key, created);                                              \
  }

#if defined(KPATH_NO_GLOBAL_DATA) && !defined(KPATH_TUNABLES_SCAN)
/* <name>.tunables.h: struct kpath_tunables, its map, one #define per tunable */
#define KPATH_STRING_(x) #x
#define KPATH_STRING(x) KPATH_STRING_(x)
#include KPATH_STRING(KPATH_TUNABLES_NAME.tunables.h)
#endif

#endif /* KPATH_BPF_H */
