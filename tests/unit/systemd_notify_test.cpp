#include "daemon/systemd_notify.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

using namespace std::chrono_literals;

namespace {

// A datagram socket bound where NOTIFY_SOCKET points: a path, or "@name" (abstract).
class Listener {
 public:
  explicit Listener(const std::string& name) : name_(name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, name.data(), name.size());
    if (name[0] == '@') address.sun_path[0] = '\0';
    bound_ = bind(fd_, reinterpret_cast<const sockaddr*>(&address),
                  static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())) == 0;
  }
  ~Listener() {
    close(fd_);
    if (name_[0] == '/') std::filesystem::remove(name_);
  }
  bool bound() const { return bound_; }
  std::optional<std::string> Receive() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) return std::nullopt;
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n < 0) return std::nullopt;
    return std::string(buffer, static_cast<size_t>(n));
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool bound_ = false;
};

}  // namespace

TEST_CASE("sd_notify messages reach a path socket and an abstract one", "[systemd]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kpath-notify-" + std::to_string(getpid())))
          .string();
  Listener at_path(path);
  REQUIRE(at_path.bound());
  REQUIRE(kpath::SendNotifyMessage(path, "READY=1\nSTATUS=ok").ok());
  CHECK(at_path.Receive() == "READY=1\nSTATUS=ok");

  const std::string abstract = "@kpath-notify-" + std::to_string(getpid());
  Listener in_namespace(abstract);
  REQUIRE(in_namespace.bound());
  REQUIRE(kpath::SendNotifyMessage(abstract, "WATCHDOG=1").ok());
  CHECK(in_namespace.Receive() == "WATCHDOG=1");
}

TEST_CASE("sd_notify refuses what is not a socket address", "[systemd]") {
  for (const std::string& bad : {std::string(""), std::string("@"), std::string("relative/path"),
                                 std::string("vsock:2:1234"), "/" + std::string(200, 'x')}) {
    INFO(bad);
    CHECK_FALSE(kpath::SendNotifyMessage(bad, "READY=1").ok());
  }
  // Nobody listening there.
  CHECK_FALSE(kpath::SendNotifyMessage("/nonexistent/kpath-notify", "READY=1").ok());
}

TEST_CASE("the watchdog interval is WATCHDOG_USEC when WATCHDOG_PID is absent or ours",
          "[systemd]") {
  CHECK(kpath::WatchdogInterval("400000", nullptr, 42) == 400000us);
  CHECK(kpath::WatchdogInterval("400000", "42", 42) == 400000us);
  CHECK(kpath::WatchdogInterval("400000", "43", 42) == std::nullopt);  // another process's
  CHECK(kpath::WatchdogInterval(nullptr, nullptr, 42) == std::nullopt);
  CHECK(kpath::WatchdogInterval("0", nullptr, 42) == std::nullopt);
  for (const char* bad : {"", "-1", "12x", " 5", "99999999999999999999999"}) {
    INFO(bad);
    CHECK(kpath::WatchdogInterval(bad, nullptr, 42) == std::nullopt);
  }
  CHECK(kpath::WatchdogInterval("400000", "x", 42) == std::nullopt);
}
