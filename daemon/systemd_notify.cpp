#include "daemon/systemd_notify.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

// A whole decimal number, nothing else.
template <typename T>
std::optional<T> ParseNumber(const char* text) {
  if (text == nullptr) return std::nullopt;
  const char* end = text + std::strlen(text);
  T value{};
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || ptr == text) return std::nullopt;
  return value;
}

absl::Status ErrnoStatus(int error, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      fmt::format("{}: {}", what, std::strerror(error)));
}

}  // namespace

absl::Status SendNotifyMessage(std::string_view notify_socket, std::string_view message) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (notify_socket.size() < 2 || (notify_socket[0] != '/' && notify_socket[0] != '@')) {
    return absl::InvalidArgumentError(
        fmt::format("NOTIFY_SOCKET \"{}\": not a path or @abstract name", notify_socket));
  }
  if (notify_socket.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        fmt::format("NOTIFY_SOCKET \"{}\": longer than a socket address holds", notify_socket));
  }
  std::memcpy(address.sun_path, notify_socket.data(), notify_socket.size());
  if (address.sun_path[0] == '@') address.sun_path[0] = '\0';  // the abstract namespace
  const auto length = static_cast<socklen_t>(
      offsetof(sockaddr_un, sun_path) + notify_socket.size() + (notify_socket[0] == '/' ? 1 : 0));
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "NOTIFY_SOCKET: socket");
  const ssize_t sent = sendto(fd, message.data(), message.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&address), length);
  const int error = errno;
  close(fd);
  if (sent < 0) return ErrnoStatus(error, fmt::format("NOTIFY_SOCKET {}", notify_socket));
  return absl::OkStatus();
}

std::optional<std::chrono::microseconds> WatchdogInterval(const char* usec, const char* pid,
                                                          pid_t self) {
  std::optional<uint64_t> interval = ParseNumber<uint64_t>(usec);
  if (!interval || *interval == 0) return std::nullopt;
  if (pid != nullptr) {
    std::optional<pid_t> for_pid = ParseNumber<pid_t>(pid);
    if (!for_pid || *for_pid != self) return std::nullopt;
  }
  return std::chrono::microseconds(*interval);
}

bool JournalStreamNames(const char* journal_stream, dev_t dev, ino_t ino) {
  if (journal_stream == nullptr) return false;
  const std::string text(journal_stream);
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  std::optional<uint64_t> named_dev = ParseNumber<uint64_t>(text.substr(0, colon).c_str());
  std::optional<uint64_t> named_ino = ParseNumber<uint64_t>(text.substr(colon + 1).c_str());
  return named_dev == static_cast<uint64_t>(dev) && named_ino == static_cast<uint64_t>(ino);
}

bool IsJournalStream(int fd) {
  const char* journal_stream = std::getenv("JOURNAL_STREAM");
  struct stat st {};
  return journal_stream != nullptr && fstat(fd, &st) == 0 &&
         JournalStreamNames(journal_stream, st.st_dev, st.st_ino);
}

SystemdNotifier::SystemdNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  if (enabled_) socket_ = socket;
  if (auto interval =
          WatchdogInterval(std::getenv("WATCHDOG_USEC"), std::getenv("WATCHDOG_PID"), getpid())) {
    ping_interval_ = *interval / 2;
  }
}

void SystemdNotifier::Send(std::string_view message) const {
  if (!enabled_) return;
  if (absl::Status s = SendNotifyMessage(socket_, message); !s.ok()) {
    spdlog::debug("sd_notify failed: {}", std::string(s.message()));
  }
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
