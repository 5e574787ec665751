// Configuration `slab:` (slab cache sizes, read so that the reading cannot stall the host).
// Applies on reload.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace kpath {

struct SlabConfig {
  // Caches always exported (seed 001: dentry and proc_inode_cache grew to millions of objects).
  // A name the kernel does not have is skipped.
  std::vector<std::string> caches = {"dentry",           "inode_cache", "proc_inode_cache",
                                     "sock_inode_cache", "buffer_head", "filp"};
  // The largest other caches by objects, also exported (0: none).
  int top_n = 10;
  // How often the caches are read: slowly, the numbers move over minutes.
  absl::Duration interval = absl::Seconds(60);
  // A read slower than this doubles the interval (up to 64 x); fast reads bring it back.
  absl::Duration max_read_time = absl::Milliseconds(50);
  bool operator==(const SlabConfig&) const = default;
};

}  // namespace kpath
