// Ownership of libbpf objects, and libbpf errors as absl::Status, shared by every BPF probe.
#pragma once

#include <bpf/libbpf.h>

#include <memory>
#include <string_view>

#include "absl/status/status.h"

namespace kpath {

// A skeleton (`foo_bpf`) owned with its generated destroy function. The generated functions are
// static inline in foo.skel.h, so headers name only the type and .cpp files pass the function:
//   OwnedSkeleton<foo_bpf> skel_{nullptr, nullptr};
//   skel_ = OwnedSkeleton<foo_bpf>(foo_bpf__open(), foo_bpf__destroy);
template <typename Skeleton>
using OwnedSkeleton = std::unique_ptr<Skeleton, void (*)(Skeleton*)>;

struct BpfLinkDeleter {
  void operator()(bpf_link* link) const { bpf_link__destroy(link); }
};
using OwnedLink = std::unique_ptr<bpf_link, BpfLinkDeleter>;

// "load: Operation not permitted (errno 1)": the step that failed and libbpf's errno (either
// sign, as libbpf returns negative codes and sets positive errno; 0 becomes EINVAL).
absl::Status LibbpfError(std::string_view step, int err);

}  // namespace kpath
