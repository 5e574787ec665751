#include "probes/collect/bpf_handles.h"

#include <cerrno>
#include <cstring>

#include "fmt/format.h"

namespace kpath {

absl::Status LibbpfError(std::string_view step, int err) {
  err = err < 0 ? -err : err;
  if (err == 0) err = EINVAL;  // libbpf does not always leave errno set
  return absl::Status(absl::ErrnoToStatusCode(err),
                      fmt::format("{}: {} (errno {})", step, std::strerror(err), err));
}

}  // namespace kpath
