// Foreign hooks appearing and leaving, as events (issue 22): each inventory is compared with the
// one before by its distinct (kind, target, owner, unit); identical hooks are one (as in
// kpath_foreign_hook_info).
#pragma once

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "probes/collect/event_sink.h"
#include "probes/hooks/hook_inventory.h"

namespace kpath {

using HookIdentity = std::tuple<std::string, std::string, std::string, std::string>;
std::set<HookIdentity> HookIdentities(const std::vector<ForeignHook>& hooks);

// hook_appeared for each hook of `now` not in `before`, hook_left for each of `before` not in
// `now`, at `time`. `first`: `before` is empty because this is kpathd's first inventory, so the
// hooks that "appear" were there when kpathd started (field at_start 1).
std::vector<Event> HookSetEvents(const std::set<HookIdentity>& before,
                                 const std::set<HookIdentity>& now, bool first, absl::Time time);

}  // namespace kpath
