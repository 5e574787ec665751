// The unit kpathd is built from: a collector samples one part of the kernel (a BPF probe's maps,
// a /proc file) on the sampling clock and appends metric families to the snapshot that /metrics
// serves. The daemon calls every method of a collector from one thread (the sampler), so a
// collector needs no locking of its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "probes/collect/event_sink.h"
#include "probes/collect/label_limits.h"
#include "probes/collect/metric_families.h"
#include "probes/kernel/mechanism.h"

namespace kpath {

// What a BPF probe got attached with, for kpath_probe_attached{probe,mechanism}.
struct ProbeState {
  std::string probe;
  Mechanism mechanism = Mechanism::kNone;  // kNone: nothing attached
  std::string detail;                      // why nothing attached, or what was attached
  // Nothing attached only because the configuration's `mechanisms` leave out every one this
  // kernel supports (for example the costly syscall tracepoint of slabinfo_readers): the probe
  // is off by choice, not broken; its collector reports success and collects nothing.
  bool excluded_by_config = false;
  // The kernel offers at least one of the probe's mechanisms (a plan's Supported() was ok when
  // it last started), whether or not the configuration allows it and whether or not it then
  // loaded. false: this kernel cannot serve the probe at all, nothing is broken.
  bool supported = true;
};

// A loaded BPF program of kpathd's own, for kpath_bpf_program_run_*{probe,program}.
struct OwnBpfProgram {
  std::string probe;
  std::string program;
  int fd = -1;
};

class Collector {
 public:
  virtual ~Collector() = default;

  // Stable name: the `collector` label of kpath_collector_success.
  virtual std::string_view Name() const = 0;

  // Attaches probes, opens files. An error is logged and the collector stays in the set, reporting
  // kpath_collector_success 0; the others carry on.
  virtual absl::Status Start() { return absl::OkStatus(); }

  // Reads the kernel and appends this collector's families. Called on the sampling clock. On error
  // the families appended by this call are dropped and kpath_collector_success is 0.
  virtual absl::Status Collect(MetricFamilies& out) = 0;

  // Detaches everything. Called once, also when Start failed.
  virtual void Stop() {}

  // BPF probes report what they attached (empty for /proc samplers).
  virtual std::vector<ProbeState> Probes() const { return {}; }
  virtual std::vector<OwnBpfProgram> Programs() const { return {}; }

  // The probe's canary: kpathd causes one event of the kind the probe watches and checks that
  // its programs counted it (kept out of the probe's own metrics). Ok: seen; an error says what
  // was not seen or could not be caused. nullopt: this collector has no canary. Called by the
  // sampler, about once a minute, only while a probe is attached.
  virtual std::optional<absl::Status> SelfTest() { return std::nullopt; }

  // New label limits from a configuration reload; collectors with folded labels apply them.
  virtual void SetLabelLimits(const LabelLimits&) {}

  // Where the collector's events go (null: nowhere); set before Start, outlives the collector.
  // Collectors that see moments worth a timestamp keep it; the others ignore it.
  virtual void SetEventSink(EventSink*) {}

  // A short fragment for the systemd STATUS= line ("Percpu 1.8 GiB +340 KiB/s"); empty for none.
  virtual std::string StatusFragment() const { return {}; }
};

}  // namespace kpath
