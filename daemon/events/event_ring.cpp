#include "daemon/events/event_ring.h"

#include <algorithm>
#include <type_traits>

namespace kpath {

size_t EventBytes(const Event& event) {
  size_t bytes = sizeof(StoredEvent) + sizeof(std::shared_ptr<const StoredEvent>) +
                 event.kind.capacity() + event.message.capacity() +
                 event.fields.capacity() * sizeof(EventField);
  for (const EventField& field : event.fields) {
    bytes += field.key.capacity();
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            bytes += v.capacity();
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            bytes += v.capacity() * sizeof(std::string);
            for (const std::string& s : v) bytes += s.capacity();
          }
        },
        field.value);
  }
  return bytes;
}

EventRing::EventRing(size_t max_events, size_t max_bytes)
    : max_events_(std::max<size_t>(1, max_events)), max_bytes_(max_bytes) {}

std::shared_ptr<const StoredEvent> EventRing::Push(Event event) {
  auto stored = std::make_shared<StoredEvent>();
  stored->event = std::move(event);
  const size_t bytes = EventBytes(stored->event);
  std::shared_ptr<const StoredEvent> evicted_last;
  absl::MutexLock lock(&mu_);
  stored->seq = ++last_seq_;
  // The newest event is always kept, whatever its size.
  while (!events_.empty() && (events_.size() >= max_events_ || bytes_ + bytes > max_bytes_)) {
    bytes_ -= EventBytes(events_.front()->event);
    newest_dropped_ = std::max(newest_dropped_, events_.front()->event.time);
    // Freed outside the lock only for the last one; the others are small and rare.
    evicted_last = std::move(events_.front());
    events_.pop_front();
    ++dropped_;
  }
  bytes_ += bytes;
  events_.push_back(stored);
  return stored;
}

EventRing::Page EventRing::Collect(size_t first_index, size_t limit) const {
  Page page;
  page.last_seq = last_seq_;
  for (size_t i = first_index; i < events_.size() && page.events.size() < limit; ++i) {
    page.events.push_back(events_[i]);
  }
  return page;
}

EventRing::Page EventRing::After(uint64_t after_seq, size_t limit) const {
  absl::MutexLock lock(&mu_);
  if (events_.empty()) {
    Page page;
    page.last_seq = last_seq_;
    page.missed = last_seq_ > after_seq ? last_seq_ - after_seq : 0;
    return page;
  }
  const uint64_t oldest = events_.front()->seq;
  const size_t first = after_seq < oldest ? 0 : static_cast<size_t>(after_seq - oldest + 1);
  Page page = Collect(first, limit);
  if (after_seq + 1 < oldest) page.missed = oldest - after_seq - 1;
  return page;
}

EventRing::Page EventRing::Since(absl::Time since, size_t limit) const {
  absl::MutexLock lock(&mu_);
  // Times are pushed in order but not strictly (a probe reports a region after the fact): look
  // at every event rather than bisect.
  size_t first = events_.size();
  for (size_t i = 0; i < events_.size(); ++i) {
    if (events_[i]->event.time >= since) {
      first = i;
      break;
    }
  }
  Page page = Collect(first, limit);
  if (newest_dropped_ >= since) {
    page.missed = 1;
    page.missed_unknown_count = true;
  }
  return page;
}

size_t EventRing::size() const {
  absl::MutexLock lock(&mu_);
  return events_.size();
}

size_t EventRing::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

uint64_t EventRing::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace kpath
