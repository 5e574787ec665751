// Which process holds which BPF program, link and BPF-carrying perf event: the owner of a hook.
// The kernel records no owner on a BPF object; the holder of its file descriptor is the closest
// thing (bpftool finds it the same way). Found by scanning <procfs>/<pid>/fd:
//   anon_inode:bpf-prog            fdinfo "prog_id:"
//   anon_inode:bpf_link            fdinfo "link_id:" (and the linked "prog_id:")
//   anon_inode:[perf_event]        BPF_TASK_FD_QUERY: the program attached to the event and the
//   anon_inode:bpf-raw-tracepoint  tracepoint, kprobe or uprobe it sits on (raw tracepoint fds
//                                  before 5.8, when they became links)
// A scan costs one readlink per open fd of every process (see ScanBpfHolders).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/kernel/host_paths.h"

namespace kpath {

// The interesting lines of a BPF fd's fdinfo.
struct BpfFdinfo {
  std::optional<uint32_t> prog_id;
  std::optional<uint32_t> link_id;
  std::string link_type;  // "raw_tracepoint", "tracing", "perf_event", ...
};
BpfFdinfo ParseBpfFdinfo(std::string_view text);

// The systemd unit a process runs in, from the text of /proc/<pid>/cgroup: its (v2, else
// name=systemd) cgroup path's unit as the cgroup churn probe names it (SystemdUnitOfCgroupPath:
// deepest unit component, transient names folded, run-u123.scope -> run-*.scope). "" outside
// any unit.
std::string SystemdUnitOfCgroupFile(std::string_view text);

// What BPF_TASK_FD_QUERY says about a perf event or raw tracepoint fd (fd_type is the kernel's
// enum bpf_task_fd_type: BPF_FD_TYPE_RAW_TRACEPOINT, _TRACEPOINT, _KPROBE, _KRETPROBE, _UPROBE,
// _URETPROBE).
struct TaskFdQuery {
  uint32_t prog_id = 0;
  uint32_t fd_type = 0;
  std::string name;  // tracepoint name, kprobe function, or uprobe binary path
  uint64_t probe_offset = 0;
  uint64_t probe_addr = 0;  // a kprobe placed by address (name empty)
};
// nullopt when the fd carries no BPF program (the common case for perf events) or is gone.
using TaskFdQueryFn = std::function<std::optional<TaskFdQuery>(pid_t pid, int fd)>;
// The real one, through the bpf syscall (needs CAP_SYS_ADMIN; pid in kpathd's pid namespace).
std::optional<TaskFdQuery> QueryTaskFd(pid_t pid, int fd);

struct ProcessIdentity {
  std::string comm;  // /proc/<pid>/comm
  std::string unit;  // systemd unit, "" if none
};

struct FdAttachment {
  pid_t pid = 0;
  TaskFdQuery query;
};

struct BpfHolders {
  std::map<uint32_t, pid_t> programs;  // prog id -> lowest pid holding an fd of it
  std::map<uint32_t, pid_t> links;     // link id -> lowest pid holding an fd of it
  std::vector<FdAttachment> attachments;
  std::map<pid_t, ProcessIdentity> processes;  // only the holders
  size_t processes_scanned = 0;
  size_t fds_scanned = 0;
};

struct BpfHolderScan {
  // Scan only this /proc entry ("self", or a pid) instead of every process.
  std::optional<std::string> only;
  // Skip this pid (kpathd's own, scanned separately as "self").
  std::optional<pid_t> skip_pid;
  // The pid to pass to BPF_TASK_FD_QUERY for `only` == "self".
  pid_t self_pid = 0;
};

// Scans <procfs>/*/fd (or one entry). Processes and fds that vanish meanwhile are skipped.
BpfHolders ScanBpfHolders(const HostPaths& paths, const BpfHolderScan& scan,
                          const TaskFdQueryFn& query);

// Moves from `foreign` to `own` what processes running kpathd's own executable hold (the same
// file as <procfs>/self/exe, by device and inode): a `kpathd diagnose` beside the service, or the
// service beside it, places kpathd's hooks, not another agent's. A different kpathd build or
// a kpathd in a container with its own image is another file, and stays foreign.
void MoveSameExecutableHolders(const HostPaths& paths, BpfHolders& foreign, BpfHolders& own);

}  // namespace kpath
