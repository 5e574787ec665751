// Configuration `irqoff:` (IRQ-disabled regions). Restart to apply: threshold and period are
// compiled into the BPF programs when they load.
#pragma once

#include "absl/time/time.h"

namespace kpath {

struct IrqOffConfig {
  // Shortest region reported. 10 ms catches seed 001's stalls (tens of milliseconds) and stays
  // above the few milliseconds by which virtual machines deliver timer interrupts late under
  // load (see probes/irqoff/README.md).
  absl::Duration threshold = absl::Milliseconds(10);
  // Period of the per-CPU software timer: the resolution of the timer methods (a region's length
  // is known to +-period/2) and their cost (one interrupt per period per busy CPU).
  absl::Duration period = absl::Milliseconds(2);
  // kpath_irqoff_max_seconds is the longest region of this sliding window, so that a scraper
  // that comes at least this often sees every region's length (a scrape interval of 15-60 s).
  absl::Duration max_window = absl::Seconds(60);
  // On a virtual machine, late ticks of a CPU and its neighbours together are a pause of the VM
  // (the hypervisor stopped every vCPU), counted as
  // kpath_irqoff_ignored_late_ticks_total{reason="vm_pause"}, not as regions. Off: counted as
  // regions (a lock convoy over every vCPU, the rule's blind spot, is then caught too). No effect
  // on bare metal.
  bool ignore_vm_pauses = true;
  bool operator==(const IrqOffConfig&) const = default;
};

}  // namespace kpath
