#include "daemon/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <string>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace kpath {

SystemdNotifier::SystemdNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    ping_interval_ = std::chrono::microseconds(usec / 2);
  }
}

void SystemdNotifier::Send(std::string_view message) const {
  if (!enabled_) return;
  std::string m(message);
  int r = sd_notify(0, m.c_str());
  if (r < 0) spdlog::debug("sd_notify failed: {}", r);
}

void SystemdNotifier::Ready(std::string_view status) const {
  Send(fmt::format("READY=1\nSTATUS={}", status));
}
void SystemdNotifier::Status(std::string_view status) const {
  Send(fmt::format("STATUS={}", status));
}
void SystemdNotifier::WatchdogPing() const { Send("WATCHDOG=1"); }
void SystemdNotifier::Reloading() const { Send("RELOADING=1\nSTATUS=reloading configuration"); }
void SystemdNotifier::ReloadDone(std::string_view status) const {
  Send(fmt::format("READY=1\nSTATUS={}", status));
}
void SystemdNotifier::Stopping() const { Send("STOPPING=1\nSTATUS=stopping"); }

}  // namespace kpath
