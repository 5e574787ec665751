#include "probes/hooks/bpf_objects.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "fmt/format.h"

namespace kpath {
namespace {

// Far above any real host (thousands of programs at most): bounds a refresh on a hostile one.
constexpr size_t kMaxObjects = 1 << 16;

struct FdCloser {
  int fd = -1;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

absl::Status ErrnoStatus(int err, std::string_view what) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      fmt::format("{}: {}", what, std::strerror(err)));
}

// Iterates ids with `next` and calls `visit(fd)` on each object still there.
template <typename Next, typename GetFd, typename Visit>
absl::Status ForEachObject(Next next, GetFd get_fd, Visit visit, std::string_view what) {
  __u32 id = 0;
  for (size_t n = 0; n < kMaxObjects; ++n) {
    if (next(id, &id) != 0) {
      int err = errno;
      if (err == ENOENT) return absl::OkStatus();  // the end
      // EINVAL: a kernel without this command (links before 5.8): none of these objects.
      if (err == EINVAL && what == "bpf_link_get_next_id") return absl::OkStatus();
      return ErrnoStatus(err, what);
    }
    FdCloser fd{get_fd(id)};
    if (fd.fd < 0) continue;  // unloaded between the two calls
    visit(fd.fd);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<BpfProgramInfo>> ListBpfPrograms() {
  std::vector<BpfProgramInfo> programs;
  absl::Status status = ForEachObject(
      bpf_prog_get_next_id, bpf_prog_get_fd_by_id,
      [&](int fd) {
        struct bpf_prog_info info;
        std::memset(&info, 0, sizeof(info));
        __u32 length = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &length) != 0) return;
        BpfProgramInfo program;
        program.id = info.id;
        program.type = info.type;
        program.name.assign(info.name, strnlen(info.name, sizeof(info.name)));
        program.run_time_ns = info.run_time_ns;
        program.run_count = info.run_cnt;
        program.attach_btf_obj_id = info.attach_btf_obj_id;
        program.attach_btf_id = info.attach_btf_id;
        programs.push_back(std::move(program));
      },
      "bpf_prog_get_next_id");
  if (!status.ok()) return status;
  return programs;
}

absl::StatusOr<std::vector<BpfLinkInfo>> ListBpfLinks() {
  std::vector<BpfLinkInfo> links;
  absl::Status status = ForEachObject(
      bpf_link_get_next_id, bpf_link_get_fd_by_id,
      [&](int fd) {
        struct bpf_link_info info;
        std::memset(&info, 0, sizeof(info));
        char tp_name[256] = {};
        __u32 length = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &length) != 0) return;
        BpfLinkInfo link;
        link.id = info.id;
        link.type = info.type;
        link.prog_id = info.prog_id;
        if (info.type == BPF_LINK_TYPE_RAW_TRACEPOINT) {
          // The name comes back only through a caller-supplied buffer: ask a second time.
          std::memset(&info, 0, sizeof(info));
          info.raw_tracepoint.tp_name = reinterpret_cast<__u64>(tp_name);
          info.raw_tracepoint.tp_name_len = sizeof(tp_name);
          length = sizeof(info);
          if (bpf_obj_get_info_by_fd(fd, &info, &length) == 0) {
            link.tp_name.assign(tp_name, strnlen(tp_name, sizeof(tp_name)));
          }
        } else if (info.type == BPF_LINK_TYPE_TRACING) {
          link.attach_type = info.tracing.attach_type;
          link.target_obj_id = info.tracing.target_obj_id;
          link.target_btf_id = info.tracing.target_btf_id;
        } else if (info.type == BPF_LINK_TYPE_CGROUP) {
          link.attach_type = info.cgroup.attach_type;
        } else if (info.type == BPF_LINK_TYPE_NETNS) {
          link.attach_type = info.netns.attach_type;
        }
        links.push_back(std::move(link));
      },
      "bpf_link_get_next_id");
  if (!status.ok()) return status;
  return links;
}

void BtfNameResolver::Resolve(const std::set<std::pair<uint32_t, uint32_t>>& wanted) {
  std::vector<std::pair<uint32_t, uint32_t>> missing;
  for (const auto& key : wanted) {
    if (key.second != 0 && !names_.contains(key) && !failed_.contains(key)) missing.push_back(key);
  }
  if (missing.empty()) return;

  struct BtfDeleter {
    void operator()(struct btf* b) const { btf__free(b); }
  };
  std::unique_ptr<struct btf, BtfDeleter> vmlinux(
      btf__parse(paths_.Sys("kernel/btf/vmlinux").c_str(), nullptr));
  std::map<uint32_t, std::unique_ptr<struct btf, BtfDeleter>> modules;
  std::set<uint32_t> base_objects;  // ids of the vmlinux BTF object itself

  // Object 0 (kernels before 5.11) and the vmlinux object are the base BTF; any other object id
  // is a module's BTF, split on top of it.
  auto btf_for = [&](uint32_t obj_id) -> struct btf* {
    if (!vmlinux) return nullptr;
    if (obj_id == 0 || base_objects.contains(obj_id)) return vmlinux.get();
    if (auto it = modules.find(obj_id); it != modules.end()) return it->second.get();
    FdCloser fd{bpf_btf_get_fd_by_id(obj_id)};
    if (fd.fd < 0) return nullptr;
    struct bpf_btf_info info;
    std::memset(&info, 0, sizeof(info));
    char name[64] = {};
    info.name = reinterpret_cast<__u64>(name);
    info.name_len = sizeof(name);
    __u32 length = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.fd, &info, &length) != 0) return nullptr;
    if (std::string_view(name) == "vmlinux") {
      base_objects.insert(obj_id);
      return vmlinux.get();
    }
    struct btf* split = btf__load_from_kernel_by_id_split(obj_id, vmlinux.get());
    modules[obj_id].reset(split);
    return split;
  };

  for (const auto& [obj_id, type_id] : missing) {
    struct btf* btf = btf_for(obj_id);
    const struct btf_type* type = btf ? btf__type_by_id(btf, type_id) : nullptr;
    const char* name = type ? btf__name_by_offset(btf, type->name_off) : nullptr;
    if (name == nullptr || *name == '\0') {
      failed_.insert({obj_id, type_id});
      continue;
    }
    names_[{obj_id, type_id}] = name;
  }
}

std::string BtfNameResolver::Name(uint32_t obj_id, uint32_t type_id) const {
  auto it = names_.find({obj_id, type_id});
  return it == names_.end() ? std::string() : it->second;
}

}  // namespace kpath
