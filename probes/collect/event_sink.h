// The moments behind the counters (issue 22): a probe that sees something worth a timestamp (an
// IRQ-off region over the threshold, a foreign hook appearing or leaving) hands a structured
// event to an EventSink. The probe knows nothing of where it goes: the daemon's sink keeps it in
// the ring served at /events and writes it to the journal (daemon/events/, docs/events.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/time/time.h"

namespace kpath {

// The `kind` of each event, as /events, the journal (KPATH_EVENT=) and kpath_events_total name it.
namespace event_kind {
inline constexpr std::string_view kIrqOffRegion = "irqoff_region";
inline constexpr std::string_view kHookAppeared = "hook_appeared";
inline constexpr std::string_view kHookLeft = "hook_left";
inline constexpr std::string_view kMadviseStormStart = "madvise_storm_start";
inline constexpr std::string_view kMadviseStormEnd = "madvise_storm_end";
inline constexpr std::string_view kCgroupChurnBurstStart = "cgroup_churn_burst_start";
inline constexpr std::string_view kCgroupChurnBurstEnd = "cgroup_churn_burst_end";
// Every kind: kpath_events_total has a series for each from the start.
inline constexpr std::string_view kAll[] = {
    kIrqOffRegion,    kHookAppeared,          kHookLeft,           kMadviseStormStart,
    kMadviseStormEnd, kCgroupChurnBurstStart, kCgroupChurnBurstEnd};
}  // namespace event_kind

struct EventField {
  // lower_snake_case: the JSON key; upper-cased after "KPATH_" in the journal.
  std::string key;
  // A list (a stack, innermost first) is a JSON array and one multi-line journal field.
  std::variant<std::string, int64_t, double, std::vector<std::string>> value;
};

struct Event {
  std::string kind;     // event_kind::*
  absl::Time time;      // when it happened, on the host's clock
  std::string message;  // one line for a person ("30.1 ms on CPU 3 in ss (pid 42), ...")
  std::vector<EventField> fields;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Takes the event. Thread-safe; bounded work (never blocks on a reader or the journal).
  virtual void Emit(Event event) = 0;
};

}  // namespace kpath
