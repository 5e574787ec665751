#include "probes/hooks/bpf_holders.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <memory>
#include <set>

#include "probes/kernel/systemd_unit.h"
#include "probes/kernel/text.h"

namespace kpath {
namespace {

using text::Trim;

struct FdCloser {
  int fd = -1;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

// Reads a small file relative to `dirfd`; "" if it cannot be read.
std::string ReadSmallFile(int dirfd, const char* path, size_t max_bytes = 4096) {
  FdCloser file{::openat(dirfd, path, O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return {};
  std::string text;
  char buffer[4096];
  while (text.size() < max_bytes) {
    ssize_t n = ::read(file.fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

bool IsPidName(const char* name) {
  if (*name == '\0') return false;
  for (const char* c = name; *c; ++c) {
    if (*c < '0' || *c > '9') return false;
  }
  return true;
}

enum class FdKind { kOther, kProgram, kLink, kPerfEvent, kRawTracepoint };

FdKind KindOfLink(std::string_view target) {
  if (!target.starts_with("anon_inode:")) return FdKind::kOther;
  target.remove_prefix(11);
  if (target == "bpf-prog") return FdKind::kProgram;
  if (target == "bpf_link") return FdKind::kLink;
  if (target == "[perf_event]") return FdKind::kPerfEvent;
  if (target == "bpf-raw-tracepoint") return FdKind::kRawTracepoint;
  return FdKind::kOther;
}

void NoteHolder(std::map<uint32_t, pid_t>& holders, uint32_t id, pid_t pid) {
  auto [it, inserted] = holders.emplace(id, pid);
  if (!inserted && pid < it->second) it->second = pid;
}

// Scans one process's fd table: `entry` is its /proc name ("1234" or "self").
void ScanProcess(int proc_fd, const std::string& entry, pid_t pid, const TaskFdQueryFn& query,
                 BpfHolders& holders) {
  std::string fd_path = entry + "/fd";
  int fd_dir_fd = ::openat(proc_fd, fd_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_dir_fd < 0) return;  // gone, or a kernel thread's empty table we may not open
  DirPtr fd_dir(::fdopendir(fd_dir_fd));
  if (!fd_dir) {
    ::close(fd_dir_fd);
    return;
  }
  ++holders.processes_scanned;
  bool holds_any = false;
  std::array<char, 64> target{};
  while (struct dirent* d = ::readdir(fd_dir.get())) {
    if (!IsPidName(d->d_name)) continue;  // "." and ".."
    ++holders.fds_scanned;
    ssize_t n = ::readlinkat(fd_dir_fd, d->d_name, target.data(), target.size());
    if (n <= 0) continue;
    FdKind kind = KindOfLink(std::string_view(target.data(), static_cast<size_t>(n)));
    if (kind == FdKind::kOther) continue;
    int fd = std::atoi(d->d_name);
    if (kind == FdKind::kProgram || kind == FdKind::kLink) {
      std::string fdinfo_path = entry + "/fdinfo/" + d->d_name;
      BpfFdinfo info = ParseBpfFdinfo(ReadSmallFile(proc_fd, fdinfo_path.c_str()));
      if (info.link_id) {
        NoteHolder(holders.links, *info.link_id, pid);
        holds_any = true;
      } else if (info.prog_id) {
        NoteHolder(holders.programs, *info.prog_id, pid);
        holds_any = true;
      }
    } else if (query) {
      if (std::optional<TaskFdQuery> result = query(pid, fd)) {
        holders.attachments.push_back(FdAttachment{pid, *std::move(result)});
        holds_any = true;
      }
    }
  }
  if (holds_any && !holders.processes.contains(pid)) {
    ProcessIdentity identity;
    identity.comm = std::string(Trim(ReadSmallFile(proc_fd, (entry + "/comm").c_str(), 64)));
    identity.unit =
        SystemdUnitOfCgroupFile(ReadSmallFile(proc_fd, (entry + "/cgroup").c_str(), 1 << 16));
    holders.processes.emplace(pid, std::move(identity));
  }
}

}  // namespace

BpfFdinfo ParseBpfFdinfo(std::string_view text) {
  BpfFdinfo info;
  for (std::string_view line : text::Lines(text)) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    std::string_view value = Trim(line.substr(colon + 1));
    if (key == "prog_id" || key == "link_id") {
      std::optional<uint64_t> id = text::ParseDecimal(value);
      if (!id || *id == 0 || *id > UINT32_MAX) continue;
      (key == "prog_id" ? info.prog_id : info.link_id) = static_cast<uint32_t>(*id);
    } else if (key == "link_type") {
      info.link_type = std::string(value);
    }
  }
  return info;
}

std::string SystemdUnitOfCgroupFile(std::string_view text) {
  // cgroup v2 ("0::/system.slice/foo.service") first, then v1's name=systemd hierarchy.
  std::string_view path;
  for (std::string_view prefix : {std::string_view("0::"), std::string_view(":name=systemd:")}) {
    for (std::string_view line : text::Lines(text)) {
      size_t at = line.find(prefix);
      if (at == std::string_view::npos) continue;
      if (prefix == "0::" && at != 0) continue;
      path = line.substr(at + prefix.size());
      break;
    }
    if (!path.empty() && path != "/") break;
  }
  if (path.empty()) return {};
  // The same unit names (and folding of transient ones) as kpath_cgroup_mkdir_total{unit}.
  std::string unit = SystemdUnitOfCgroupPath(path);
  return unit == kNoUnit ? std::string() : unit;
}

std::optional<TaskFdQuery> QueryTaskFd(pid_t pid, int fd) {
  char buffer[4096];
  __u32 length = sizeof(buffer);
  TaskFdQuery result;
  __u32 prog_id = 0, fd_type = 0;
  __u64 offset = 0, address = 0;
  if (bpf_task_fd_query(pid, fd, 0, buffer, &length, &prog_id, &fd_type, &offset, &address) != 0) {
    return std::nullopt;  // ENOENT: no program on this perf event; EBADF: closed meanwhile
  }
  result.prog_id = prog_id;
  result.fd_type = fd_type;
  result.name.assign(buffer, strnlen(buffer, std::min<size_t>(length, sizeof(buffer))));
  result.probe_offset = offset;
  result.probe_addr = address;
  return result;
}

BpfHolders ScanBpfHolders(const HostPaths& paths, const BpfHolderScan& scan,
                          const TaskFdQueryFn& query) {
  BpfHolders holders;
  FdCloser proc{::open(paths.procfs_root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (proc.fd < 0) return holders;
  if (scan.only) {
    pid_t pid = *scan.only == "self" ? scan.self_pid : std::atoi(scan.only->c_str());
    ScanProcess(proc.fd, *scan.only, pid, query, holders);
    return holders;
  }
  int list_fd = ::openat(proc.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (list_fd < 0) return holders;
  DirPtr list(::fdopendir(list_fd));
  if (!list) {
    ::close(list_fd);
    return holders;
  }
  while (struct dirent* d = ::readdir(list.get())) {
    if (!IsPidName(d->d_name)) continue;
    pid_t pid = std::atoi(d->d_name);
    if (scan.skip_pid && pid == *scan.skip_pid) continue;
    ScanProcess(proc.fd, d->d_name, pid, query, holders);
  }
  return holders;
}

void MoveSameExecutableHolders(const HostPaths& paths, BpfHolders& foreign, BpfHolders& own) {
  struct stat self {};
  if (stat(paths.Proc("self/exe").c_str(), &self) != 0) return;
  std::set<pid_t> same;
  for (const auto& [pid, identity] : foreign.processes) {
    struct stat exe {};
    if (stat(paths.Proc(std::to_string(pid) + "/exe").c_str(), &exe) == 0 &&
        exe.st_dev == self.st_dev && exe.st_ino == self.st_ino) {
      same.insert(pid);
    }
  }
  if (same.empty()) return;
  auto move_ids = [&](std::map<uint32_t, pid_t>& from, std::map<uint32_t, pid_t>& to) {
    for (auto it = from.begin(); it != from.end();) {
      if (same.contains(it->second)) {
        to.emplace(it->first, it->second);
        it = from.erase(it);
      } else {
        ++it;
      }
    }
  };
  move_ids(foreign.programs, own.programs);
  move_ids(foreign.links, own.links);
  std::erase_if(foreign.attachments, [&](const FdAttachment& attachment) {
    if (!same.contains(attachment.pid)) return false;
    own.attachments.push_back(attachment);
    return true;
  });
  for (pid_t pid : same) foreign.processes.erase(pid);
}

}  // namespace kpath
