#include "probes/kernel/host_paths.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace kpath {

absl::StatusOr<std::string> ReadFileToString(const std::filesystem::path& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        fmt::format("open {}: {}", path.string(), std::strerror(err)));
  }
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return absl::Status(absl::ErrnoToStatusCode(err),
                          fmt::format("read {}: {}", path.string(), std::strerror(err)));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      return absl::ResourceExhaustedError(
          fmt::format("read {}: larger than {} bytes", path.string(), max_bytes));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace kpath
