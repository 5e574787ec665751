// A region of IRQs off as reported: the BPF programs' record (struct irqoff_event) decoded and
// symbolized.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "probes/cgroups/kubernetes_pods.h"
#include "probes/collect/event_sink.h"
#include "probes/kernel/kernel_symbolizer.h"

struct irqoff_event;

namespace kpath {

// A region as reported: the event symbolized.
struct IrqOffRegion {
  double seconds = 0;
  int cpu = -1;
  uint32_t pid = 0;
  std::string comm;
  std::string culprit;
  std::vector<std::string> frames;  // innermost first; "0x..." where unknown
  bool task_switched = false;       // the interrupt landed in a later thread (see irqoff.h)
  bool user_mode = false;           // the interrupt landed in user code
  bool unwitnessed = false;         // no other CPU looked at this one meanwhile (see irqoff.h)
  PodLabels pod;                    // the process's pod (kubernetes.pod_labels), else empty
};

// Builds the region from a raw event (pure but for the symbolizer).
IrqOffRegion RegionFromEvent(const irqoff_event& event, KernelSymbolizer& symbolizer);

// "23.1 ms on CPU 1 in ss (pid 4242), culprit get_slabinfo; stack: a <- b <- c"
std::string DescribeRegion(const IrqOffRegion& region);

// The region as an event (kind irqoff_region) that ended at `end`: seconds, cpu, pid, comm,
// culprit, stack (innermost first), and where the late interrupt landed.
Event RegionEvent(const IrqOffRegion& region, absl::Time end);
// The wall-clock time of a bpf_ktime_get_ns() reading (CLOCK_MONOTONIC).
absl::Time WallTimeOfMonotonic(uint64_t monotonic_ns);

// "2.5ms": a duration as irqoff's plan targets and log lines write it.
std::string FormatMs(absl::Duration d);

}  // namespace kpath
