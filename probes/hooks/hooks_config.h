// Settings of the foreign-hook inventory (configuration `hooks:`), header-only so that the
// configuration library can hold them without linking the collector.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

namespace kpath {

// How the kernel's per-program BPF run-time statistics are obtained for foreign programs. They
// cost every BPF program on the host about 20 ns per run while on.
enum class BpfStatsMode {
  kOff,      // never turned on by kpathd (still read when the sysctl is on)
  kAlways,   // a BPF_ENABLE_STATS fd held from start to stop: exact
  kSampled,  // held for bpf_stats_slice of every refresh_interval, figures scaled up
};

inline std::string_view BpfStatsModeName(BpfStatsMode mode) {
  switch (mode) {
    case BpfStatsMode::kOff:
      return "off";
    case BpfStatsMode::kAlways:
      return "always";
    case BpfStatsMode::kSampled:
      return "sampled";
  }
  return "off";
}

inline std::optional<BpfStatsMode> ParseBpfStatsMode(std::string_view name) {
  for (BpfStatsMode mode : {BpfStatsMode::kOff, BpfStatsMode::kAlways, BpfStatsMode::kSampled}) {
    if (BpfStatsModeName(mode) == name) return mode;
  }
  return std::nullopt;
}

// Targets where a hook runs thousands to millions of times per second. Seed 002: a host-security
// agent's kprobes on security_file_permission and friends cost an OceanBase benchmark 30 % of its
// throughput. The rest are what common security and observability agents hook (file permission
// checks, VFS read/write/open, socket send/receive, the scheduler switch, syscall entry and exit,
// page faults, the allocator). Functions are matched without clone suffixes (.isra.0) and LSM
// hooks by their security_<hook> function; "category:event" entries are tracepoints.
inline std::vector<std::string> DefaultHotFunctions() {
  return {
      // File permission checks (LSM) and VFS
      "security_file_permission",
      "security_file_open",
      "security_inode_permission",
      "security_mmap_file",
      "vfs_read",
      "vfs_write",
      "vfs_readv",
      "vfs_writev",
      "vfs_open",
      "do_sys_open",
      "do_sys_openat2",
      "do_filp_open",
      "ksys_read",
      "ksys_write",
      "__fput",
      // Syscall entry and exit
      "do_syscall_64",
      "__x64_sys_read",
      "__x64_sys_write",
      "__x64_sys_openat",
      "el0_svc",
      "__arm64_sys_read",
      "__arm64_sys_write",
      "__arm64_sys_openat",
      "raw_syscalls:sys_enter",
      "raw_syscalls:sys_exit",
      "syscalls:sys_enter_read",
      "syscalls:sys_enter_write",
      "syscalls:sys_enter_openat",
      // Sockets
      "security_socket_sendmsg",
      "security_socket_recvmsg",
      "sock_sendmsg",
      "sock_recvmsg",
      "tcp_sendmsg",
      "tcp_recvmsg",
      "udp_sendmsg",
      "udp_recvmsg",
      "tcp_v4_rcv",
      "ip_output",
      "dev_queue_xmit",
      "netif_receive_skb",
      "net:net_dev_queue",
      "net:netif_receive_skb",
      // Scheduler
      "__schedule",
      "schedule",
      "finish_task_switch",
      "try_to_wake_up",
      "sched:sched_switch",
      "sched:sched_wakeup",
      // Memory
      "handle_mm_fault",
      "exc_page_fault",
      "do_page_fault",
      "__kmalloc",
      "kmem_cache_alloc",
      "kfree",
      "exceptions:page_fault_user",
      "kmem:kmalloc",
      "kmem:kfree",
  };
}

struct HooksConfig {
  bool enabled = true;
  // How often the inventory is rebuilt; sampling ticks in between serve the last one.
  absl::Duration refresh_interval = absl::Seconds(15);
  // Most kpath_foreign_hook_info series; the rest are counted in
  // kpath_foreign_hook_info_omitted.
  int max_info_series = 200;
  // Most distinct program names in kpath_foreign_bpf_run_*; the rest fold into "other".
  int top_programs = 30;
  BpfStatsMode bpf_stats = BpfStatsMode::kSampled;
  // sampled: how long the statistics are held on in each refresh_interval.
  absl::Duration bpf_stats_slice = absl::Seconds(1);
  std::vector<std::string> hot_functions = DefaultHotFunctions();
  bool operator==(const HooksConfig&) const = default;
};

}  // namespace kpath
