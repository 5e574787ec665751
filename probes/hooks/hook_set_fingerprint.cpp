#include "probes/hooks/hook_set_fingerprint.h"

#include <set>
#include <string_view>
#include <tuple>

#include "fmt/format.h"

namespace kpath {
namespace {

// 64-bit FNV-1a (Fowler, Noll, Vo; draft-eastlake-fnv).
constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

void HashField(uint64_t& hash, std::string_view field) {
  for (unsigned char c : field) {
    hash ^= c;
    hash *= kFnvPrime;
  }
  hash *= kFnvPrime;  // the terminating NUL: hash ^= 0 leaves hash as it is
}

std::string_view StableTarget(const ForeignHook& hook) {
  bool kprobe = hook.kind == hook_kind::kKprobe || hook.kind == hook_kind::kKretprobe;
  // A C function name never starts with a digit: "0x..." is an address (hook_inventory.cpp).
  if (kprobe && hook.target.starts_with("0x")) return "address";
  return hook.target;
}

}  // namespace

std::string HookSetFingerprint::Hex() const { return fmt::format("{:016x}", value); }

HookSetFingerprint FingerprintHookSet(std::span<const ForeignHook> hooks) {
  std::set<std::tuple<std::string_view, std::string_view, std::string_view>> set;
  for (const ForeignHook& hook : hooks) set.emplace(hook.kind, StableTarget(hook), hook.owner);
  HookSetFingerprint fingerprint{.value = kFnvOffsetBasis, .hooks = set.size()};
  for (const auto& [kind, target, owner] : set) {
    HashField(fingerprint.value, kind);
    HashField(fingerprint.value, target);
    HashField(fingerprint.value, owner);
  }
  return fingerprint;
}

}  // namespace kpath
