// The sd_notify protocol (Type=notify): READY=1, STATUS=, WATCHDOG=1, RELOADING=1, STOPPING=1;
// and JOURNAL_STREAM, whether stderr goes to journald.
// Without NOTIFY_SOCKET (not under systemd) every call is a no-op.
//
// kpathd speaks the protocol itself (one datagram to an AF_UNIX socket, as systemd's
// sd_notify(3) documents it for reimplementation) rather than through libsystemd, which would
// load libsystemd, libgcrypt, libgpg-error, liblzma, libzstd, liblz4 and libcap: ~0.9 MiB of
// resident memory (bench/README.md, "Memory") for two functions.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace kpath {

// Sends `message` to the socket NOTIFY_SOCKET names: a path, or "@name" for the abstract
// namespace (as sd_notify(0, message)).
absl::Status SendNotifyMessage(std::string_view notify_socket, std::string_view message);

// What sd_watchdog_enabled(3) answers, from WATCHDOG_USEC and WATCHDOG_PID (either may be null):
// the watchdog interval when it is set and meant for `self` (no WATCHDOG_PID, or that pid).
std::optional<std::chrono::microseconds> WatchdogInterval(const char* usec, const char* pid,
                                                          pid_t self);

// Whether JOURNAL_STREAM (`journal_stream`, may be null) names the file whose device and inode
// are `dev` and `ino`: "DEV:INODE" in decimal, as systemd sets it for a unit whose stdout or
// stderr goes to journald (systemd.exec(5), sd_journal_stream_fd(3)).
bool JournalStreamNames(const char* journal_stream, dev_t dev, ino_t ino);
// Whether the open file `fd` is that stream (this process's JOURNAL_STREAM): false when it was
// redirected elsewhere, even under systemd.
bool IsJournalStream(int fd);

class SystemdNotifier {
 public:
  SystemdNotifier();
  bool enabled() const { return enabled_; }
  // How often to ping: half of WATCHDOG_USEC, if systemd asked for pings.
  std::optional<std::chrono::microseconds> WatchdogPingInterval() const { return ping_interval_; }

  void Ready(std::string_view status) const;
  void Status(std::string_view status) const;
  void WatchdogPing() const;
  void Reloading() const;
  void ReloadDone(std::string_view status) const;
  void Stopping() const;

 private:
  void Send(std::string_view message) const;
  bool enabled_ = false;
  std::string_view socket_;  // NOTIFY_SOCKET, from the environment (lives as long as it)
  std::optional<std::chrono::microseconds> ping_interval_;
};

}  // namespace kpath
