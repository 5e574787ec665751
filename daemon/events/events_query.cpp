#include "daemon/events/events_query.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "daemon/events/event_json.h"
#include "fmt/format.h"
#include "probes/collect/event_sink.h"

namespace kpath {
namespace {

constexpr size_t kMaxLimit = 10000;

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() &&
               std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

absl::Status ParseSince(std::string_view text, absl::Time now, EventsQuery& query) {
  std::string t(text);
  // A '+' of a time zone offset that a shell user left unescaped in the URL arrives as a space.
  std::replace(t.begin(), t.end(), ' ', '+');
  uint64_t seq = 0;
  double unix_seconds = 0;
  absl::Duration back;
  absl::Time time;
  std::string error;
  if (AllDigits(t) && absl::SimpleAtoi(t, &seq)) {
    query.after_seq = seq;
  } else if (t.size() > 1 && t[0] == '@' && absl::SimpleAtod(t.substr(1), &unix_seconds) &&
             unix_seconds >= 0) {
    query.since_time = absl::FromUnixNanos(static_cast<int64_t>(unix_seconds * 1e9));
  } else if (absl::ParseTime(absl::RFC3339_full, t, &time, &error)) {
    query.since_time = time;
  } else if (absl::ParseDuration(t, &back) && back >= absl::ZeroDuration()) {
    query.since_time = now - back;
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "since \"{}\": a sequence number (42), an RFC 3339 time (2026-12-03T07:00:00Z), Unix "
        "seconds (@1796281200) or a duration back from now (1h)",
        text));
  }
  return absl::OkStatus();
}

absl::StatusOr<EventsQuery> ParseEventsQuery(std::string_view query_string, absl::Time now) {
  EventsQuery query;
  while (!query_string.empty()) {
    const size_t amp = query_string.find('&');
    std::string_view pair = query_string.substr(0, amp);
    query_string = amp == std::string_view::npos ? "" : query_string.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string name = PercentDecode(pair.substr(0, eq));
    const std::string value =
        eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1));
    if (name == "since") {
      if (absl::Status s = ParseSince(value, now, query); !s.ok()) return s;
    } else if (name == "kind") {
      if (std::find(std::begin(event_kind::kAll), std::end(event_kind::kAll), value) ==
          std::end(event_kind::kAll)) {
        std::string kinds;
        for (std::string_view k : event_kind::kAll)
          kinds += fmt::format("{}{}", kinds.empty() ? "" : ", ", k);
        return absl::InvalidArgumentError(fmt::format("kind \"{}\": one of {}", value, kinds));
      }
      query.kind = value;
    } else if (name == "format") {
      if (value != "json" && value != "lines") {
        return absl::InvalidArgumentError(
            fmt::format("format \"{}\": json (one document, the default) or lines", value));
      }
      query.lines = value == "lines";
    } else if (name == "limit") {
      size_t limit = 0;
      if (!absl::SimpleAtoi(value, &limit) || limit < 1 || limit > kMaxLimit) {
        return absl::InvalidArgumentError(
            fmt::format("limit \"{}\": a number of events from 1 to {}", value, kMaxLimit));
      }
      query.limit = limit;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("unknown parameter \"{}\" (since, kind, limit and format are known)", name));
    }
  }
  return query;
}

std::string EventsReplyJson(const EventRing& ring, const EventsQuery& query) {
  EventRing::Page page;
  bool restarted = false;
  if (query.since_time) {
    page = ring.Since(*query.since_time, query.limit);
  } else {
    uint64_t after = query.after_seq.value_or(0);
    if (after > ring.After(0, 0).last_seq) {
      restarted = true;
      after = 0;
    }
    page = ring.After(after, query.limit);
  }
  // The page's events are ours now: serialise them without holding the ring, up to max_bytes.
  uint64_t next_since = page.events.empty() ? page.last_seq : page.events.back()->seq;
  std::string events;
  bool first = true;
  for (const auto& event : page.events) {
    if (query.kind && event->event.kind != *query.kind) continue;
    const size_t before = events.size();
    if (!first && !query.lines) events += ',';
    events += EventJson(*event);
    if (query.lines) events += '\n';
    if (!first && events.size() > query.max_bytes) {
      // Cut before this event: the reader asks for it next.
      events.resize(before);
      next_since = event->seq - 1;
      break;
    }
    first = false;
  }
  std::string out = fmt::format(
      "{{\"last_seq\":{},\"next_since\":{},\"more\":{},\"missed\":{},\"missed_count_known\":{},"
      "\"restarted\":{}",
      page.last_seq, next_since, next_since < page.last_seq ? "true" : "false", page.missed,
      page.missed_unknown_count ? "false" : "true", restarted ? "true" : "false");
  out += query.lines ? "}\n" : ",\"events\":[";
  if (!query.lines) events += "]}\n";
  // In place: the events are the bulk of the reply, the header a line.
  events.insert(0, out);
  return events;
}

}  // namespace kpath
