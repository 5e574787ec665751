// SPDX-License-Identifier: GPL-2.0
/* cgroup churn (seed 000): every cgroup mkdir and rmdir, counted by process and path tail. One
 * pair of programs (mkdir, rmdir) per way to hook the cgroup:cgroup_mkdir/cgroup_rmdir
 * tracepoints; user space enables exactly one pair after asking the kernel.
 *
 * Both tracepoints pass (struct cgroup *cgrp, const char *path) since Linux 4.19; the path is
 * relative to the hierarchy's root ("/system.slice/foo.service"). The programs read nothing
 * through CO-RE, so the object also loads on kernels without BTF (raw_tp, tracepoint). */
/* kpath_bpf.h first: its vmlinux.h defines the types cgroup_churn.h uses. */
// clang-format off
#include "kpath_bpf.h"
#include "cgroup_churn.h"
// clang-format on

char LICENSE[] SEC("license") = "GPL";

/* Classic tracepoints: offsets of the `__data_loc char[] path` fields, from the format files. */
KPATH_TUNABLE(__u32, tp_mkdir_path_offset, 0);
KPATH_TUNABLE(__u32, tp_rmdir_path_offset, 0);
/* Classic tracepoints: offsets of the `root` fields (the hierarchy id), 0 when absent. */
KPATH_TUNABLE(__u32, tp_mkdir_root_offset, 0);
KPATH_TUNABLE(__u32, tp_rmdir_root_offset, 0);
/* From vmlinux BTF, or 0: task_struct.comm (see kpath_current_comm), and for tp_btf
 * cgroup.kn, kernfs_node.hash, cgroup.self.parent and cgroup_subsys_state.serial_nr: with all
 * four the tp_btf programs key a cgroup by its parent's serial number and its name's hash, loads
 * from the cgroup that the verifier checks against BTF (no CO-RE relocation: the offsets are
 * constants to it). */
KPATH_TUNABLE(__u32, task_comm_offset, 0);
KPATH_TUNABLE(__u32, cgroup_kn_offset, 0);
KPATH_TUNABLE(__u32, kn_hash_offset, 0);
KPATH_TUNABLE(__u32, cgroup_parent_offset, 0);
KPATH_TUNABLE(__u32, css_serial_offset, 0);
/* kernfs_node.name from vmlinux BTF, or 0: the name's shape (churn_shapes) needs it. */
KPATH_TUNABLE(__u32, kn_name_offset, 0);
/* From vmlinux BTF, or 0: cgroup.root and cgroup_root.hierarchy_id, the cgroup's hierarchy
 * (cgroup_churn_path.hierarchy). */
KPATH_TUNABLE(__u32, cgroup_root_offset, 0);
KPATH_TUNABLE(__u32, root_hierarchy_id_offset, 0);

/* 1024 keys per interval: the hash is drained every sampling interval, and only distinct
 * (process, path tail) pairs take an entry; more spill into the overflow slot ("other"). The
 * per-CPU cache in front (kpath_bpf.h) takes the usual few keys without touching the hash. */
KPATH_CACHED_KEYED_COUNTERS(churn_counts, struct cgroup_churn_key, struct cgroup_churn_value, 1024)

/* Path tails by path key, one map per buffer of churn_counts: a tail is sent when its key takes
 * a counter in that buffer (so at most once per CPU and interval), and user space reads and
 * empties the map of the buffer it drains. Twice the hash's keys: the caches hold keys too. A
 * tail that finds the map full leaves its counts without a unit ("other", and
 * kpath_cgroup_churn_unlabelled_total), unless user space knows the key from before. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 2048);
  __type(key, __u64);
  __type(value, struct cgroup_churn_path);
} churn_paths_0 SEC(".maps"), churn_paths_1 SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct cgroup_churn_scratch);
} scratch SEC(".maps");

/* Shape keys whose names all fold to one unit, written by user space (cgroup_churn.h). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, CGROUP_CHURN_SHAPE_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} churn_shapes SEC(".maps");

#define CGROUP_CHURN_WORDS (CGROUP_CHURN_TAIL_LEN / 8)
#define CGROUP_CHURN_HALF (CGROUP_CHURN_WORDS / 2)

/* Hashes words[first, last) of a NUL-terminated string into `hash` (one multiply per 8 bytes;
 * the bytes after its NUL are ignored, whatever they hold); sets *terminated at the NUL. */
static __always_inline __u64 hash_string_words(__u64 hash, const __u64* words, int first, int last,
                                               bool* terminated) {
#pragma unroll
  for (int i = first; i < last; i++) {
    __u64 w = words[i];
    __u64 zero = kpath_zero_bytes(w);
    if (zero) {
      hash = (hash ^ kpath_before_nul(w, zero)) * KPATH_HASH_MUL;
      *terminated = true;
      break;
    }
    hash = (hash ^ w) * KPATH_HASH_MUL;
  }
  return hash;
}

/* The path tail's key: a hash of the path's bytes, read in blocks of 64 (a plain read costs far
 * less than a string read, which copies byte by byte). Paths of 128 bytes or more keep their
 * last 127 (`truncated`): the slow way, a string read to learn the length. */
static __always_inline __u64 path_tail_key(struct cgroup_churn_scratch* s, const char* path,
                                           __u32* truncated) {
  bool terminated = false;
  __u64 hash = CGROUP_CHURN_TAIL_LEN;
  if (bpf_probe_read_kernel(s->words, CGROUP_CHURN_TAIL_LEN / 2, path) == 0) {
    hash = hash_string_words(hash, s->words, 0, CGROUP_CHURN_HALF, &terminated);
    if (!terminated &&
        bpf_probe_read_kernel(&s->words[CGROUP_CHURN_HALF], CGROUP_CHURN_TAIL_LEN / 2,
                              path + CGROUP_CHURN_TAIL_LEN / 2) == 0) {
      hash = hash_string_words(hash, s->words, CGROUP_CHURN_HALF, CGROUP_CHURN_WORDS, &terminated);
    }
  }
  if (!terminated) {
    /* 128 bytes or more (or not readable as blocks): learn the length, keep the end. */
    long len = bpf_probe_read_kernel_str(s->full, sizeof(s->full), path);
    if (len > (long)CGROUP_CHURN_TAIL_LEN && len <= (long)sizeof(s->full)) {
      bpf_probe_read_kernel(s->words, CGROUP_CHURN_TAIL_LEN - 1,
                            path + (len - CGROUP_CHURN_TAIL_LEN));
      *truncated = 1;
    } else if (len > 0) {
      bpf_probe_read_kernel(s->words, sizeof(s->words), s->full);
    } else {
      __builtin_memset(s->words, 0, sizeof(s->words)); /* unreadable: an empty path, unit none */
    }
    ((char*)s->words)[CGROUP_CHURN_TAIL_LEN - 1] = '\0';
    hash = hash_string_words(CGROUP_CHURN_TAIL_LEN, s->words, 0, CGROUP_CHURN_WORDS, &terminated);
  }
  hash ^= *truncated;
  return hash ^ (hash >> 29);
}

/* A different key for each hierarchy: the same path made in several (cgroup v1) never shares a
 * counter, and user space counts it once. */
static __always_inline __u64 key_in_hierarchy(__u64 key, __u32 hierarchy) {
  return hierarchy == CGROUP_CHURN_HIERARCHY_UNKNOWN ? key : key ^ ((__u64)hierarchy << 32);
}

/* 0x80 in each byte of `x` that is zero (exact: no borrow crosses a byte). */
static __always_inline __u64 zero_bytes_exact(__u64 x) {
  return ~(((x & 0x7f7f7f7f7f7f7f7fULL) + 0x7f7f7f7f7f7f7f7fULL) | x) & 0x8080808080808080ULL;
}

/* 0x80 in each byte of `w` that is an ASCII digit: a byte is one when its xor with '0' has a
 * zero high nibble and a low nibble below 10 (no carry crosses a byte in either test). */
static __always_inline __u64 digit_bytes(__u64 w) {
  __u64 x = w ^ 0x3030303030303030ULL;
  __u64 not_digit = (x & 0xf0f0f0f0f0f0f0f0ULL) |
                    (((x & 0x0f0f0f0f0f0f0f0fULL) + 0x0606060606060606ULL) & 0x1010101010101010ULL);
  return zero_bytes_exact(not_digit);
}

/* `w` with each ASCII digit among the bytes `name` selects (0xff each) replaced by '#', the
 * shape's bytes; the digits replaced are or-ed into *digits. */
static __always_inline __u64 shape_word(__u64 w, __u64 name, __u64* digits) {
  __u64 d = digit_bytes(w) & name;
  __u64 mask = (d >> 7) * 0xff;
  *digits |= d;
  return (w & ~mask) | (0x2323232323232323ULL & mask);
}

/* The key of a shape's hash (0 for a name without digits): hierarchy and CGROUP_CHURN_SHAPE_BIT
 * in. */
static __always_inline __u64 shape_key_of(__u64 hash, __u64 digits, __u32 hierarchy) {
  if (!digits) return 0;
  return key_in_hierarchy(hash ^ (hash >> 29), hierarchy) | CGROUP_CHURN_SHAPE_BIT;
}

/* A word of a NUL-terminated string with the bytes after its NUL cleared; *zero is non-zero
 * when the NUL is in it. */
static __always_inline __u64 string_word(__u64 w, __u64* zero) {
  *zero = kpath_zero_bytes(w);
  return *zero ? kpath_before_nul(w, *zero) : w;
}

/* tp_btf: the key of the shape of the cgroup's name (cgroup_churn.h) under its parent's serial
 * number, or 0 for a name without digits, of 64 bytes or more, or unreadable: 64 bytes read,
 * then a multiply per word up to the NUL. */
static __always_inline __u64 name_shape_key(struct cgroup_churn_scratch* s, const char* kn,
                                            __u64 parent_serial, __u32 hierarchy) {
  if (!kn_name_offset) return 0;
  const char* name = *(const char* const*)(kn + kn_name_offset);
  if (bpf_probe_read_kernel(s->words, CGROUP_CHURN_TAIL_LEN / 2, name) != 0) return 0;
  __u64 hash = parent_serial * KPATH_HASH_MUL;
  __u64 digits = 0;
#pragma unroll
  for (int i = 0; i < CGROUP_CHURN_HALF; i++) {
    __u64 zero;
    __u64 w = string_word(s->words[i], &zero);
    hash = (hash ^ shape_word(w, ~0ULL, &digits)) * KPATH_HASH_MUL;
    if (zero) return shape_key_of(hash, digits, hierarchy);
  }
  return 0;
}

/* The bytes of a word after its last '/' (0xff each), given the word's '/' bytes (0x80 each,
 * at least one): every byte at or below the highest '/' (little-endian: at or before it in
 * the string) is smeared down, the rest are the name's. */
static __always_inline __u64 bytes_after_last_slash(__u64 slashes) {
  __u64 s = slashes >> 7;
  s |= s >> 8;
  s |= s >> 16;
  s |= s >> 32;
  return ~(s * 0xff);
}

/* raw_tp and tracepoint: the same shape from the path's words that path_tail_key left in the
 * scratch (the path, or its last 127 bytes): the last component's digits masked, hashed after
 * the path up to it (the parent, by path, where tp_btf has its serial number). One pass: at each
 * word with a '/', the shape's hash restarts from the plain hash of the words before it. */
static __always_inline __u64 path_shape_key(const struct cgroup_churn_scratch* s, __u32 truncated,
                                            __u32 hierarchy) {
  __u64 plain = CGROUP_CHURN_TAIL_LEN ^ truncated;
  __u64 hash = plain;
  __u64 digits = 0;
#pragma unroll
  for (int i = 0; i < CGROUP_CHURN_WORDS; i++) {
    __u64 zero;
    __u64 w = string_word(s->words[i], &zero);
    __u64 slashes = zero_bytes_exact(w ^ 0x2f2f2f2f2f2f2f2fULL);
    __u64 name = ~0ULL;
    if (slashes) {
      hash = plain;
      digits = 0;
      name = bytes_after_last_slash(slashes);
    }
    hash = (hash ^ shape_word(w, name, &digits)) * KPATH_HASH_MUL;
    plain = (plain ^ w) * KPATH_HASH_MUL;
    if (zero) return shape_key_of(hash, digits, hierarchy);
  }
  return 0;
}

static __always_inline bool shape_known(__u64 shape_key) {
  __u32 slot = (__u32)shape_key & (CGROUP_CHURN_SHAPE_SLOTS - 1);
  __u64* known = bpf_map_lookup_elem(&churn_shapes, &slot);
  return known && *known == shape_key;
}

#if KPATH_ABLATION
/* The cheapest exact count of one key (bench/bpf_cost_ab.py's "slot"): a per-CPU array. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1024);
  __type(key, __u32);
  __type(value, __u64);
} ablation_slots SEC(".maps");
#endif

/* With counting cut (KPATH_ABLATE_COUNT), what is kept of the unique-name path, part by part:
 * the name read, its shape hashed, one per-CPU slot counted by the key (no hash, no comm). */
static __always_inline void count_ablated(struct cgroup_churn_scratch* s, __u64 key,
                                          __u32 truncated, __u32 hierarchy, const char* kn,
                                          __u64 parent_serial) {
  if (KPATH_ABLATED(KEEP_SHAPE)) {
    __u64 shape = kn ? name_shape_key(s, kn, parent_serial, hierarchy)
                     : path_shape_key(s, truncated, hierarchy);
    if (shape) key = shape;
  } else if (KPATH_ABLATED(KEEP_NAME) && kn && kn_name_offset) {
    const char* name = *(const char* const*)(kn + kn_name_offset);
    if (bpf_probe_read_kernel(s->words, CGROUP_CHURN_TAIL_LEN / 2, name) == 0) key ^= s->words[0];
  }
#if KPATH_ABLATION
  if (KPATH_ABLATED(KEEP_SLOT)) {
    __u32 slot = (__u32)key & 1023;
    __u64* n = bpf_map_lookup_elem(&ablation_slots, &slot);
    if (n) *n += 1;
  }
#endif
  kpath_ablation_sink(key);
}

static __always_inline void add_event(struct cgroup_churn_value* v, bool rmdir) {
  if (rmdir) {
    v->rmdirs += 1;
  } else {
    v->mkdirs += 1;
  }
}

/* Counts one event under (comm, path_key): a key the cache holds (a timer's service, made again
 * and again) is counted at once; else a name of a shape user space knows is counted under the
 * shape, the shape read from the cgroup's kernfs node `kn` (tp_btf) or, where `kn` is NULL (a
 * constant), from the path's words path_tail_key left in the scratch. Rarely
 * (the key's first event in this interval on this CPU), also sends the path tail, the hierarchy
 * and the name's shape key (0: none): a string read and a hash insert; a shape's key
 * (CGROUP_CHURN_SHAPE_BIT) sends nothing: user space knows it. */
static __always_inline void count_cgroup_key(struct cgroup_churn_scratch* s, __u64 path_key,
                                             const char* path, __u32 truncated, __u32 hierarchy,
                                             bool rmdir, const char* kn, __u64 parent_serial) {
  if (KPATH_ABLATED(COUNT)) {
    count_ablated(s, path_key, truncated, hierarchy, kn, parent_serial);
    return;
  }
  struct cgroup_churn_key key = {.path_key = path_key & ~CGROUP_CHURN_SHAPE_BIT};
  kpath_current_comm(key.comm, task_comm_offset);
  __u32 buffer = churn_counts_buffer();
  struct cgroup_churn_value* held = churn_counts_cache_find(buffer, &key);
  if (held) {
    add_event(held, rmdir);
    return;
  }
  __u64 shape_key = kn ? name_shape_key(s, kn, parent_serial, hierarchy)
                       : path_shape_key(s, truncated, hierarchy);
  if (shape_key && shape_known(shape_key)) key.path_key = shape_key;
  path_key = key.path_key;
  bool created = false;
  struct cgroup_churn_value* v = churn_counts_cached_slot(buffer, &key, &created);
  if (!v) return;
  if (created && !(path_key & CGROUP_CHURN_SHAPE_BIT) && !KPATH_ABLATED(TRACK)) {
    /* The tail, clean and zero-padded, for user space. */
    struct cgroup_churn_path* record = &s->path;
    __builtin_memset(record, 0, sizeof(*record));
    if (truncated) {
      bpf_probe_read_kernel(record->tail, sizeof(record->tail), s->words);
    } else if (bpf_probe_read_kernel_str(record->tail, sizeof(record->tail), path) ==
               sizeof(record->tail)) {
      /* Longer than the tail (a key from the kernfs node, not from the path): keep its end. */
      long len = bpf_probe_read_kernel_str(s->full, sizeof(s->full), path);
      if (len > (long)CGROUP_CHURN_TAIL_LEN && len <= (long)sizeof(s->full)) {
        bpf_probe_read_kernel(record->tail, CGROUP_CHURN_TAIL_LEN - 1,
                              path + (len - CGROUP_CHURN_TAIL_LEN));
        record->tail[CGROUP_CHURN_TAIL_LEN - 1] = '\0';
        truncated = 1;
      }
    }
    record->truncated = truncated;
    record->hierarchy = hierarchy;
    record->shape_key = shape_key;
    /* One branch per map: the verifier needs a constant map at each call. */
    if (buffer) {
      bpf_map_update_elem(&churn_paths_1, &path_key, record, BPF_NOEXIST);
    } else {
      bpf_map_update_elem(&churn_paths_0, &path_key, record, BPF_NOEXIST);
    }
  }
  add_event(v, rmdir);
}

static __always_inline void count_cgroup_path(const char* path, __u32 hierarchy, bool rmdir) {
  if (KPATH_ABLATED(RETURN)) {
    kpath_ablation_sink((__u64)path ^ hierarchy);
    return;
  }
  __u32 zero = 0;
  struct cgroup_churn_scratch* s = bpf_map_lookup_elem(&scratch, &zero);
  if (!s) return;
  __u32 truncated = 0;
  __u64 path_key = key_in_hierarchy(path_tail_key(s, path, &truncated), hierarchy);
  count_cgroup_key(s, path_key, path, truncated, hierarchy, rmdir, NULL, 0);
}

/* The hierarchy of a cgroup that is not a BTF pointer (raw_tp): two reads at offsets from BTF,
 * or unknown without them. */
static __always_inline __u32 hierarchy_of_raw(const char* cgrp) {
  if (!cgroup_root_offset || !root_hierarchy_id_offset) return CGROUP_CHURN_HIERARCHY_UNKNOWN;
  const char* root = NULL;
  __s32 id = 0;
  if (bpf_probe_read_kernel(&root, sizeof(root), cgrp + cgroup_root_offset) != 0 ||
      bpf_probe_read_kernel(&id, sizeof(id), root + root_hierarchy_id_offset) != 0) {
    return CGROUP_CHURN_HIERARCHY_UNKNOWN;
  }
  return (__u32)id;
}

/* tp_btf: the cgroup is a BTF pointer. Its kernfs node's name hash (kernfs keeps one per node
 * for its own lookups) and its parent's serial number (never reused, unique across hierarchies)
 * are four loads, no string read. Siblings whose names share a 31-bit kernfs hash would share a
 * key: user space then labels both with the path sent first in that interval. */
static __always_inline void count_cgroup_btf(const void* cgrp, const char* path, bool rmdir) {
  if (KPATH_ABLATED(RETURN)) {
    /* The path alone: arithmetic on the cgroup, a trusted BTF pointer, is refused by the
     * verifier (6.18: "math between trusted_ptr_ pointer and register"), and the ablated
     * object would not load as tp_btf. */
    kpath_ablation_sink((__u64)path);
    return;
  }
  /* Two loads: cgroup.root, cgroup_root.hierarchy_id. */
  __u32 hierarchy = CGROUP_CHURN_HIERARCHY_UNKNOWN;
  if (cgroup_root_offset && root_hierarchy_id_offset) {
    const char* root = *(const char* const*)((const char*)cgrp + cgroup_root_offset);
    hierarchy = (__u32) * (const __s32*)(root + root_hierarchy_id_offset);
  }
  if (!cgroup_kn_offset || !kn_hash_offset || !cgroup_parent_offset || !css_serial_offset) {
    count_cgroup_path(path, hierarchy, rmdir);
    return;
  }
  __u32 zero = 0;
  struct cgroup_churn_scratch* s = bpf_map_lookup_elem(&scratch, &zero);
  if (!s) return;
  const char* kn = *(const char* const*)((const char*)cgrp + cgroup_kn_offset);
  __u32 name_hash = *(const __u32*)(kn + kn_hash_offset);
  const char* parent = *(const char* const*)((const char*)cgrp + cgroup_parent_offset);
  __u64 parent_serial = *(const __u64*)(parent + css_serial_offset);
  /* Top-level cgroups of different hierarchies have parents of the same serial number (their
   * roots'): the hierarchy tells them apart. */
  count_cgroup_key(s, key_in_hierarchy((parent_serial * KPATH_HASH_MUL) ^ name_hash, hierarchy),
                   path, 0, hierarchy, rmdir, kn, parent_serial);
}

SEC("tp_btf/cgroup_mkdir")
int BPF_PROG(cgroup_mkdir_tp_btf, struct cgroup* cgrp, const char* path) {
  count_cgroup_btf(cgrp, path, false);
  return 0;
}

SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(cgroup_rmdir_tp_btf, struct cgroup* cgrp, const char* path) {
  count_cgroup_btf(cgrp, path, true);
  return 0;
}

SEC("raw_tp/cgroup_mkdir")
int BPF_PROG(cgroup_mkdir_raw_tp, struct cgroup* cgrp, const char* path) {
  count_cgroup_path(path, hierarchy_of_raw((const char*)cgrp), false);
  return 0;
}

SEC("raw_tp/cgroup_rmdir")
int BPF_PROG(cgroup_rmdir_raw_tp, struct cgroup* cgrp, const char* path) {
  count_cgroup_path(path, hierarchy_of_raw((const char*)cgrp), true);
  return 0;
}

/* A __data_loc field holds the string's offset from the record start (low 16 bits) and its
 * length (high 16 bits). */
static __always_inline const char* tp_data_loc_string(void* ctx, __u32 field_offset) {
  __u32 loc = (__u32)kpath_tp_field(ctx, field_offset, sizeof(__u32));
  return (const char*)ctx + (loc & 0xffff);
}

/* The `root` field: the hierarchy id (an int). */
static __always_inline __u32 tp_hierarchy(void* ctx, __u32 root_offset) {
  if (!root_offset) return CGROUP_CHURN_HIERARCHY_UNKNOWN;
  return (__u32)kpath_tp_field(ctx, root_offset, sizeof(__s32));
}

SEC("tp/cgroup/cgroup_mkdir")
int cgroup_mkdir_tracepoint(void* ctx) {
  count_cgroup_path(tp_data_loc_string(ctx, tp_mkdir_path_offset),
                    tp_hierarchy(ctx, tp_mkdir_root_offset), false);
  return 0;
}

SEC("tp/cgroup/cgroup_rmdir")
int cgroup_rmdir_tracepoint(void* ctx) {
  count_cgroup_path(tp_data_loc_string(ctx, tp_rmdir_path_offset),
                    tp_hierarchy(ctx, tp_rmdir_root_offset), true);
  return 0;
}
