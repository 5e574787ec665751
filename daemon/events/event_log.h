// The daemon's EventSink: every event goes into the ring /events serves and, at most
// `output_per_second` of them (bursts up to `output_burst`), to the journal as structured fields
// when kpathd's stderr is journald's stream and its socket is there, else to the log as one line
// each, "event: " and the event's JSON. Counts them for kpath_events_total and
// kpath_events_dropped_total.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "daemon/events/event_ring.h"
#include "daemon/events/journal_entry.h"
#include "probes/collect/event_sink.h"
#include "probes/collect/metric_families.h"

namespace kpath {

enum class EventOutput { kJournal, kJsonLines, kNone };
// kJournal when stderr is this process's JOURNAL_STREAM (`stderr_is_journal`: kpathd runs under
// systemd with its output to journald, IsJournalStream) and journald's socket `journal_socket`
// exists; kJsonLines otherwise.
EventOutput ChooseEventOutput(bool stderr_is_journal,
                              std::string_view journal_socket = kJournalSocket);
std::string_view EventOutputName(EventOutput output);

struct EventLogOptions {
  // A ring of 16384 events or 4 MiB, whichever is reached first: an hour of one IRQ-off region
  // every quarter second with 32-frame stacks.
  size_t max_events = 16384;
  size_t max_bytes = 4 << 20;
  EventOutput output = EventOutput::kJsonLines;
  std::string journal_socket = std::string(kJournalSocket);
  // Writes one line of the log (kJsonLines): the daemon's formats it as its log lines are (a
  // "<6>" priority under systemd, a timestamp otherwise) whatever the log level. Null: stderr.
  std::function<void(const std::string& line)> write_line = nullptr;
  double output_per_second = 100;
  double output_burst = 1000;
};

class EventLog final : public EventSink {
 public:
  explicit EventLog(EventLogOptions options);
  void Emit(Event event) override;

  const EventRing& ring() const { return ring_; }
  EventOutput output() const { return options_.output; }
  // kpath_events_total{kind} and kpath_events_dropped_total{reason}.
  void AppendFamilies(MetricFamilies& out) const;

 private:
  // One token of the output's bucket, if there is one.
  bool TakeOutputToken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Write(const StoredEvent& event);

  const EventLogOptions options_;
  EventRing ring_;
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t, std::less<>> emitted_ ABSL_GUARDED_BY(mu_);
  uint64_t rate_limited_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t output_failed_ ABSL_GUARDED_BY(mu_) = 0;
  double tokens_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point refilled_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kpath
