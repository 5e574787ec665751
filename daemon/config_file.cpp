#include "daemon/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kpath {
namespace {

// A config file is a few kilobytes; a huge one is the wrong file (or /dev/zero).
constexpr size_t kMaxConfigFileBytes = 1 << 20;

}  // namespace

absl::StatusOr<std::string> ReadConfigFileText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  }
  // Closes the descriptor on every return below.
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  // fstat on the opened descriptor, so the checked file is the one that is read.
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("stat ", path, ": ", std::strerror(errno)));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("read ", path, ": ", std::strerror(EISDIR)));
  }
  // Anyone who can write the file could point the daemon elsewhere or switch probes off.
  if (info.st_mode & S_IWOTH) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": refusing a world-writable config file (mode ", mode, "); chmod o-w it"));
  }

  std::string text;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(absl::StrCat("read ", path, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxConfigFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": larger than ", kMaxConfigFileBytes / 1024, " KiB; is this the config file?"));
    }
  }
  return text;
}

}  // namespace kpath
