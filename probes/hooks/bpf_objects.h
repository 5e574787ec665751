// Every BPF program and link in the kernel, through the bpf syscall (next-id iteration, then
// get-fd-by-id and object info), and kernel BTF type names for their attach targets. Needs
// CAP_SYS_ADMIN. Only fields present since the uapi of Linux 6.1 are used; a field an older
// kernel lacks reads as 0.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "probes/kernel/host_paths.h"

struct btf;

namespace kpath {

struct BpfProgramInfo {
  uint32_t id = 0;
  uint32_t type = 0;  // enum bpf_prog_type
  std::string name;   // up to 15 characters; may be empty
  uint64_t run_time_ns = 0;
  uint64_t run_count = 0;
  uint32_t attach_btf_obj_id = 0;  // tracing/LSM: BTF object of the target (5.11+)
  uint32_t attach_btf_id = 0;      // tracing/LSM: BTF type of the target
};

struct BpfLinkInfo {
  uint32_t id = 0;
  uint32_t type = 0;  // enum bpf_link_type
  uint32_t prog_id = 0;
  std::string tp_name;         // raw tracepoint links (also tp_btf programs)
  uint32_t attach_type = 0;    // tracing and cgroup links: enum bpf_attach_type
  uint32_t target_obj_id = 0;  // tracing links (5.13+)
  uint32_t target_btf_id = 0;
};

// All programs; an error (EPERM without CAP_SYS_ADMIN, ENOSYS) only if none could be listed.
absl::StatusOr<std::vector<BpfProgramInfo>> ListBpfPrograms();
// All links (5.8+; an empty list on older kernels, which have none).
absl::StatusOr<std::vector<BpfLinkInfo>> ListBpfLinks();

// Resolves (BTF object id, type id) pairs to type names: vmlinux BTF from <sysfs>/kernel/btf/
// vmlinux, module BTF by object id on top of it. Names never change for an id, so they are
// cached; BTF is loaded only when a pair is new, and freed after each Resolve.
class BtfNameResolver {
 public:
  explicit BtfNameResolver(HostPaths paths) : paths_(std::move(paths)) {}
  // Resolves the pairs not yet known. Object id 0 means vmlinux (kernels before 5.11).
  void Resolve(const std::set<std::pair<uint32_t, uint32_t>>& wanted);
  // "" when unknown.
  std::string Name(uint32_t obj_id, uint32_t type_id) const;
  const std::map<std::pair<uint32_t, uint32_t>, std::string>& names() const { return names_; }

 private:
  HostPaths paths_;
  std::map<std::pair<uint32_t, uint32_t>, std::string> names_;
  std::set<std::pair<uint32_t, uint32_t>> failed_;  // not retried
};

}  // namespace kpath
