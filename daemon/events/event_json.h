// Events as JSON (RFC 8259): one object per event, on one line, as /events serves them and
// kpathd writes them to stderr when no journal takes them. Strings from the kernel (a comm, a
// stack frame) may hold any byte: quotes, backslashes and control characters are escaped, and
// bytes that are not UTF-8 become U+FFFD, so every line is valid JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "daemon/events/event_ring.h"

namespace kpath {

// `text` as a JSON string, quotes included.
std::string JsonString(std::string_view text);
// "2026-12-03T07:01:02.123456Z": RFC 3339 in UTC, microseconds.
std::string Rfc3339(absl::Time time);
// {"seq":1,"time":"...","kind":"irqoff_region","message":"...", <fields>}
std::string EventJson(const StoredEvent& event);

// From one line of JSON that kpathd wrote (EventJson, the /events header): the value of the
// key `key` (its first occurrence: keys of kpathd's objects are unique and come before any
// nested value), a string unescaped or anything else as written; nullopt if absent. Not a
// general JSON reader: `kpathd events` and the tests read kpathd's own lines with it.
std::optional<std::string> JsonField(std::string_view line, std::string_view key);

}  // namespace kpath
