#include "daemon/events/event_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "daemon/events/event_json.h"
#include "daemon/events/events_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

EventOutput ChooseEventOutput(bool stderr_is_journal, std::string_view journal_socket) {
  struct stat st {};
  const bool socket_there =
      stat(std::string(journal_socket).c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  return stderr_is_journal && socket_there ? EventOutput::kJournal : EventOutput::kJsonLines;
}

std::string_view EventOutputName(EventOutput output) {
  switch (output) {
    case EventOutput::kJournal:
      return "the journal (structured fields)";
    case EventOutput::kJsonLines:
      return "the log (\"event: \" and JSON, a line each)";
    case EventOutput::kNone:
      break;
  }
  return "nowhere but /events";
}

EventLog::EventLog(EventLogOptions options)
    : options_(std::move(options)),
      ring_(options_.max_events, options_.max_bytes),
      tokens_(options_.output_burst),
      refilled_(std::chrono::steady_clock::now()) {
  absl::MutexLock lock(&mu_);
  for (std::string_view kind : event_kind::kAll) emitted_.emplace(std::string(kind), 0);
}

bool EventLog::TakeOutputToken() {
  const auto now = std::chrono::steady_clock::now();
  tokens_ = std::min(options_.output_burst,
                     tokens_ + std::chrono::duration<double>(now - refilled_).count() *
                                   options_.output_per_second);
  refilled_ = now;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

void EventLog::Emit(Event event) {
  std::shared_ptr<const StoredEvent> stored = ring_.Push(std::move(event));
  bool write = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = emitted_.find(stored->event.kind);
    if (it == emitted_.end()) it = emitted_.emplace(stored->event.kind, 0).first;
    ++it->second;
    if (options_.output != EventOutput::kNone) {
      write = TakeOutputToken();
      if (!write) ++rate_limited_;
    }
  }
  if (write) Write(*stored);
}

void EventLog::Write(const StoredEvent& event) {
  absl::Status status;
  if (options_.output == EventOutput::kJournal) {
    status = SendJournalDatagram(options_.journal_socket, JournalEntry(event));
  } else if (options_.write_line) {
    options_.write_line("event: " + EventJson(event));
  } else {
    // One write(2) a line, so that it never interleaves mid-line with another.
    std::string line = "event: " + EventJson(event) + "\n";
    if (write(STDERR_FILENO, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      status = absl::ErrnoToStatus(errno, "write event line");
    }
  }
  if (status.ok()) return;
  std::string error(status.message());
  bool first_of_its_kind = false;
  {
    absl::MutexLock lock(&mu_);
    ++output_failed_;
    first_of_its_kind = error != last_error_;
    last_error_ = error;
  }
  // Once per distinct error: a full journal must not flood the log.
  if (first_of_its_kind)
    spdlog::warn("events: not written to {}: {}", EventOutputName(options_.output), error);
}

void EventLog::AppendFamilies(MetricFamilies& out) const {
  FamilyBuilder total(events_metrics::kEventsTotal);
  FamilyBuilder dropped(events_metrics::kEventsDroppedTotal);
  const double overwritten = static_cast<double>(ring_.dropped());
  absl::MutexLock lock(&mu_);
  for (const auto& [kind, n] : emitted_) total.Add({{"kind", kind}}, static_cast<double>(n));
  dropped.Add({{"reason", "ring_overwritten"}}, overwritten)
      .Add({{"reason", "output_rate_limited"}}, static_cast<double>(rate_limited_))
      .Add({{"reason", "output_failed"}}, static_cast<double>(output_failed_));
  total.AppendTo(out);
  dropped.AppendTo(out);
}

}  // namespace kpath
