// GET /events: the query (since=, kind=, limit=) and the JSON reply, as a pure function of the
// ring and the query string (the web server only passes them through).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/events/event_ring.h"

namespace kpath {

// At most this many bytes of events in one /events reply (the header aside; a single larger
// event is still sent alone): a reader far behind gets its events a reply at a time, each built
// in bounded time and memory, and reads on with since=<next_since> while "more" is true.
constexpr size_t kMaxEventsReplyBytes = 256 << 10;

struct EventsQuery {
  // since=: a sequence number (events after it), or a time (events at or after it).
  std::optional<uint64_t> after_seq;
  std::optional<absl::Time> since_time;
  std::optional<std::string> kind;          // kind=: only this kind
  size_t limit = 1000;                      // limit=: 1 to 10000 events per reply
  bool lines = false;                       // format=lines: the header, then one event a line
  size_t max_bytes = kMaxEventsReplyBytes;  // not a parameter: the server's cap
};

// `since` as the query and the CLI take it: a sequence number ("42"), an RFC 3339 time
// ("2026-12-03T07:00:00Z"), Unix seconds ("@1796281200") or a duration back from `now` ("1h").
absl::Status ParseSince(std::string_view text, absl::Time now, EventsQuery& query);
// The query string of a request (without "?"), percent-decoded. An unknown parameter, a bad
// value or an unknown kind is an InvalidArgument naming it.
absl::StatusOr<EventsQuery> ParseEventsQuery(std::string_view query_string, absl::Time now);

// {"last_seq":N,"next_since":M,"more":false,"missed":K,"missed_count_known":true,
//  "restarted":false,"events":[...]}: next_since is what to pass as since= to read on; more:
// the reply stopped at `limit` events or `max_bytes` before the newest event (read on at once
// to catch up); missed counts events after
// the reader's position that the ring had dropped (a time query knows only whether some were);
// restarted: since= was past the newest event (the reader followed an earlier kpathd), so the
// reply starts from the oldest event kept. format=lines: the same header object without
// "events" on the first line, then each event on a line of its own (what `kpathd events` reads).
// The events are serialised after the ring's lock is released (the page holds them).
std::string EventsReplyJson(const EventRing& ring, const EventsQuery& query);

}  // namespace kpath
