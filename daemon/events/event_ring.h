// The bounded in-memory ring of events that /events serves: at most `max_events` events and
// about `max_bytes` of them; the oldest go first. Each event gets the next sequence number
// (from 1, never reused while the process runs), so a reader that asks for what follows the
// last one it saw learns how many it missed when the ring overwrote them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "probes/collect/event_sink.h"

namespace kpath {

struct StoredEvent {
  uint64_t seq = 0;
  Event event;
};

// About how much memory an event holds (its strings and vectors included).
size_t EventBytes(const Event& event);

class EventRing {
 public:
  EventRing(size_t max_events, size_t max_bytes);

  // Keeps `event` (dropping the oldest as needed); returns its sequence number.
  std::shared_ptr<const StoredEvent> Push(Event event);

  struct Page {
    std::vector<std::shared_ptr<const StoredEvent>> events;  // oldest first
    // Events after the reader's position that the ring had already dropped: a gap before
    // events.front() (seq queries), or, for time queries, whether any event at or after the
    // time was dropped (missed is then at least 1 but its count is not known).
    uint64_t missed = 0;
    bool missed_unknown_count = false;
    uint64_t last_seq = 0;  // the newest sequence number pushed so far (0: none)
  };
  // Events with seq > after_seq, at most `limit` of them.
  Page After(uint64_t after_seq, size_t limit) const;
  // Events whose time is at or after `since`, at most `limit` of them.
  Page Since(absl::Time since, size_t limit) const;

  size_t size() const;
  size_t bytes() const;
  uint64_t dropped() const;  // overwritten since start

 private:
  Page Collect(size_t first_index, size_t limit) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_events_;
  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<const StoredEvent>> events_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest time among the dropped events (InfinitePast: none dropped).
  absl::Time newest_dropped_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace kpath
