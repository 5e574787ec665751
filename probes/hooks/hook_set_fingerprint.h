// One value for a node's whole set of foreign hooks (issue 22, "foreign-hook set drift"): nodes
// whose sets are equal export equal fingerprints, so comparing 2,000 nodes' kprobes/list with a
// healthy host's (how seed 002 was found) becomes a PromQL count by fingerprint.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "probes/hooks/hook_inventory.h"

namespace kpath {

struct HookSetFingerprint {
  uint64_t value = 0;
  size_t hooks = 0;  // distinct (kind, target, owner) in the set

  std::string Hex() const;  // 16 lower-case hex digits, the `fingerprint` label
};

// The identity of the set, not of one reading of it. Taken over the distinct (kind, target,
// owner) of `hooks` (the inventory, which already leaves kpathd's own out), sorted bytewise, each
// field ended by a NUL byte (no field holds one), hashed with 64-bit FNV-1a: a published
// function any script can recompute, the same on every build and architecture. Left out, since
// they differ between nodes whose hooks are the same: the holder's pid (never in a hook), its
// systemd unit (transient unit names carry numbers), program and link ids, `hot` (configuration,
// not the hook), how many identical hooks there are, and the address of a kprobe placed on a raw
// kernel address (KASLR moves it every boot: all such targets read "address"). The scheme is part
// of the metrics contract (docs/metrics.md): changing it changes every node's value at once.
HookSetFingerprint FingerprintHookSet(std::span<const ForeignHook> hooks);

}  // namespace kpath
