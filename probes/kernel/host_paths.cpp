#include "probes/kernel/host_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace kpath {

bool PathExists(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

bool IsDirectory(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

absl::StatusOr<std::string> ReadFileToString(const std::filesystem::path& path, size_t max_bytes) {
  // O_NONBLOCK: a FIFO or device put where a /proc or /sys file belongs (a hostile or broken
  // --procfs-root tree) must not hang the sampling loop; such a file is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        fmt::format("open {}: {}", path.string(), std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(fmt::format("read {}: not a regular file", path.string()));
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
