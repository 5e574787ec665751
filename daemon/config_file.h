// Reading a file of settings (kpathd.yaml, the web configuration) or one that such a file names
// (a TLS certificate or key).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kpath {

// The file's text: a missing, unreadable, world-writable or over-large (1 MiB) file is an error
// naming the path.
absl::StatusOr<std::string> ReadConfigFileText(const std::string& path);

}  // namespace kpath
