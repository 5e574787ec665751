// Opening a probe's skeleton from the object this kernel takes, for objects that have a second
// build for kernels without BPF global data (before Linux 5.2; KPATH_TUNABLE in
// probes/bpf/kpath_bpf.h, NO_GLOBAL_DATA in cmake/BpfSkeleton.cmake).
#pragma once

#include <bpf/libbpf.h>

#include <cstddef>
#include <cstdlib>

#include "absl/status/status.h"
#include "probes/collect/bpf_handles.h"

namespace kpath {

// The skeleton `Skeleton` (foo_bpf) opened from its default object, or, when `global_data` is
// false, from the object's KPATH_NO_GLOBAL_DATA build (`legacy_elf`, foo_legacy_bpf__elf_bytes),
// which has the same programs, maps and .rodata layout under the same names, plus the map
// kpath_tunables: user space sets skel->rodata as always, and FillTunablesMap copies it there
// after load. Null when libbpf cannot open the object (errno set, as foo_bpf__open()).
template <typename Skeleton>
OwnedSkeleton<Skeleton> OpenSkeletonFor(bool global_data, Skeleton* (*open)(),
                                        int (*create)(Skeleton*),
                                        const void* (*legacy_elf)(std::size_t*),
                                        void (*destroy)(Skeleton*)) {
  if (global_data) return OwnedSkeleton<Skeleton>(open(), destroy);
  // foo_bpf__open_opts, with the other object's bytes.
  OwnedSkeleton<Skeleton> skel(static_cast<Skeleton*>(std::calloc(1, sizeof(Skeleton))), destroy);
  if (!skel || create(skel.get()) != 0) return OwnedSkeleton<Skeleton>(nullptr, destroy);
  skel->skeleton->data = const_cast<void*>(legacy_elf(&skel->skeleton->data_sz));
  if (bpf_object__open_skeleton(skel->skeleton, nullptr) != 0) {
    return OwnedSkeleton<Skeleton>(nullptr, destroy);
  }
  return skel;
}

// KPATH_OPEN_SKELETON(foo, kernel.HasBpfGlobalData()): OpenSkeletonFor with foo's functions.
#define KPATH_OPEN_SKELETON(name, global_data)                                                    \
  ::kpath::OpenSkeletonFor<name##_bpf>((global_data), name##_bpf__open,                           \
                                       name##_bpf__create_skeleton, name##_legacy_bpf__elf_bytes, \
                                       name##_bpf__destroy)

// After load and before attach: on an object of the KPATH_NO_GLOBAL_DATA build, writes the
// tunables user space set in its .rodata into the map kpath_tunables, each field from the
// .rodata variable of the same name (<name>__rodata), as the object's BTF lays them out. Ok and
// nothing done for an object without that map.
absl::Status FillTunablesMap(bpf_object* obj);

}  // namespace kpath
