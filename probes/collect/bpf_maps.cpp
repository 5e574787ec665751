#include "probes/collect/bpf_maps.h"

#include <sys/stat.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "fmt/format.h"

namespace kpath {

void EnableOnly(bpf_object* obj, std::span<bpf_program* const> programs) {
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, obj) {
    bpf_program__set_autoload(prog,
                              std::find(programs.begin(), programs.end(), prog) != programs.end());
  }
}

std::vector<OwnBpfProgram> LoadedPrograms(std::string_view probe, bpf_object* obj) {
  std::vector<OwnBpfProgram> programs;
  if (!obj) return programs;
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, obj) {
    if (!bpf_program__autoload(prog)) continue;
    int fd = bpf_program__fd(prog);
    if (fd >= 0) programs.push_back({std::string(probe), bpf_program__name(prog), fd});
  }
  return programs;
}

int MapFd(bpf_object* obj, const char* name) {
  bpf_map* map = bpf_object__find_map_by_name(obj, name);
  return map ? bpf_map__fd(map) : -1;
}

bpf_link* AttachProgram(bpf_program* prog, const char* kprobe_symbol) {
  if (kprobe_symbol) return bpf_program__attach_kprobe(prog, /*retprobe=*/false, kprobe_symbol);
  return bpf_program__attach(prog);
}

absl::StatusOr<size_t> PossibleCpus() {
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return LibbpfError("libbpf_num_possible_cpus", ncpus);
  return static_cast<size_t>(ncpus);
}

absl::StatusOr<uint64_t> SumPerCpu(int map_fd, uint32_t key, std::string_view step) {
  absl::StatusOr<std::vector<uint64_t>> per_cpu = ReadPerCpu<uint64_t>(map_fd, key, step);
  if (!per_cpu.ok()) return per_cpu.status();
  uint64_t sum = 0;
  for (uint64_t v : *per_cpu) sum += v;
  return sum;
}

absl::StatusOr<MappedArray> MappedArray::Of(bpf_map* map, bool writable) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t bytes = size_t{bpf_map__max_entries(map)} * bpf_map__value_size(map);
  MappedArray mapped;
  mapped.bytes_ = (bytes + page - 1) / page * page;
  void* m = mmap(nullptr, mapped.bytes_, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                 bpf_map__fd(map), 0);
  if (m == MAP_FAILED) return LibbpfError(fmt::format("mmap {}", bpf_map__name(map)), errno);
  mapped.data_ = m;
  mapped.entries_ = bpf_map__max_entries(map);
  return mapped;
}

MappedArray& MappedArray::operator=(MappedArray&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    entries_ = std::exchange(other.entries_, 0);
  }
  return *this;
}

MappedArray::~MappedArray() {
  if (data_) munmap(data_, bytes_);
}

OwnPidNamespace OwnPidNamespaceForBpf() {
  static const OwnPidNamespace ns = [] {
    OwnPidNamespace found;
    struct stat st {};
    if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_get_ns_current_pid_tgid,
                                nullptr) == 1 &&
        stat("/proc/self/ns/pid", &st) == 0) {
      found.dev = st.st_dev;
      found.ino = st.st_ino;
    }
    return found;
  }();
  return ns;
}

}  // namespace kpath
