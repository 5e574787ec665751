#include "probes/hooks/hook_events.h"

#include <algorithm>
#include <iterator>

#include "fmt/format.h"

namespace kpath {
namespace {

Event HookEvent(std::string_view kind, const HookIdentity& hook, bool at_start, absl::Time time) {
  const auto& [hook_kind, target, owner, unit] = hook;
  Event event;
  event.kind = std::string(kind);
  event.time = time;
  event.message =
      fmt::format("foreign {} on {} (owner {}, unit {}) {}", hook_kind, target, owner, unit,
                  kind == event_kind::kHookLeft ? "left"
                  : at_start                    ? "present when kpathd started"
                                                : "appeared");
  event.fields = {{"hook_kind", hook_kind}, {"target", target}, {"owner", owner}, {"unit", unit}};
  if (kind == event_kind::kHookAppeared) event.fields.push_back({"at_start", int64_t{at_start}});
  return event;
}

}  // namespace

std::set<HookIdentity> HookIdentities(const std::vector<ForeignHook>& hooks) {
  std::set<HookIdentity> out;
  for (const ForeignHook& h : hooks) out.emplace(h.kind, h.target, h.owner, h.unit);
  return out;
}

std::vector<Event> HookSetEvents(const std::set<HookIdentity>& before,
                                 const std::set<HookIdentity>& now, bool first, absl::Time time) {
  std::vector<HookIdentity> appeared, left;
  std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                      std::back_inserter(appeared));
  std::set_difference(before.begin(), before.end(), now.begin(), now.end(),
                      std::back_inserter(left));
  std::vector<Event> events;
  for (const HookIdentity& h : left)
    events.push_back(HookEvent(event_kind::kHookLeft, h, false, time));
  for (const HookIdentity& h : appeared) {
    events.push_back(HookEvent(event_kind::kHookAppeared, h, first, time));
  }
  return events;
}

}  // namespace kpath
