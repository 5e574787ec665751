// The sd_notify protocol (Type=notify): READY=1, STATUS=, WATCHDOG=1, RELOADING=1, STOPPING=1.
// Without NOTIFY_SOCKET (not under systemd) every call is a no-op.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace kpath {

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
  std::optional<std::chrono::microseconds> ping_interval_;
};

}  // namespace kpath
