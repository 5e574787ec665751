// The loader kit every BPF probe uses between open and Collect: which programs load, how one is
// attached, which were loaded, and the reads of per-CPU and mmapped array maps.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probes/collect/bpf_handles.h"
#include "probes/collect/collector.h"

namespace kpath {

// Loads only `programs` of `obj` (null entries are skipped): a skeleton loads every program it
// has unless told otherwise, and the others are for other kernels.
void EnableOnly(bpf_object* obj, std::span<bpf_program* const> programs);
inline void EnableOnly(bpf_object* obj, std::initializer_list<bpf_program*> programs) {
  EnableOnly(obj, std::span<bpf_program* const>(programs.begin(), programs.size()));
}

// The programs of `obj` that were loaded, in the object's order, for kpath_bpf_program_run_*.
std::vector<OwnBpfProgram> LoadedPrograms(std::string_view probe, bpf_object* obj);

// The fd of `obj`'s map of that name; -1 without one.
int MapFd(bpf_object* obj, const char* name);

// Attaches `prog` as a kprobe at `kprobe_symbol` when one is given, else the way its section
// says (tracepoints, and fentry with its target set before load). Null on failure, errno set.
bpf_link* AttachProgram(bpf_program* prog, const char* kprobe_symbol = nullptr);

// The possible CPUs, as many as a per-CPU map has values per key: libbpf's count of the running
// kernel. (KernelFeatures::PossibleCpus reads the configured sysfs root instead, which a fixture
// tree may replace; per-CPU map buffers must follow the kernel.)
absl::StatusOr<size_t> PossibleCpus();

// One key's value on every possible CPU of a per-CPU map (`T` a whole number of 8-byte words, as
// the kernel lays per-CPU values out); an error names `step`.
template <typename T, typename Key = uint32_t>
absl::StatusOr<std::vector<T>> ReadPerCpu(int map_fd, const Key& key, std::string_view step) {
  absl::StatusOr<size_t> ncpus = PossibleCpus();
  if (!ncpus.ok()) return ncpus.status();
  std::vector<T> per_cpu(*ncpus);
  if (bpf_map_lookup_elem(map_fd, &key, per_cpu.data()) != 0) return LibbpfError(step, errno);
  return per_cpu;
}

// A per-CPU counter: the key's values summed over CPUs.
// kpathd's pid namespace as bpf_get_ns_current_pid_tgid takes it (the nsfs device and inode of
// /proc/self/ns/pid), for kpath_current_is_self (kpath_bpf.h); zeros where the kernel lacks the
// helper (before 5.7): the programs then compare ids of the initial namespace.
struct OwnPidNamespace {
  uint64_t dev = 0;
  uint64_t ino = 0;
};
OwnPidNamespace OwnPidNamespaceForBpf();

absl::StatusOr<uint64_t> SumPerCpu(int map_fd, uint32_t key, std::string_view step);

// A read-only mmap of a BPF array map created with BPF_F_MMAPABLE; unmapped when destroyed.
class MappedArray {
 public:
  // `writable`: mapped for writing too (data the BPF side reads from user space).
  static absl::StatusOr<MappedArray> Of(bpf_map* map, bool writable = false);
  MappedArray() = default;
  MappedArray(MappedArray&& other) noexcept { *this = std::move(other); }
  MappedArray& operator=(MappedArray&& other) noexcept;
  ~MappedArray();
  const void* data() const { return data_; }
  void* writable_data() const { return data_; }  // mapped with Of(map, true) only
  size_t entries() const { return entries_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t entries_ = 0;
};

}  // namespace kpath
