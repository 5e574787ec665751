// Test support: makes a real, attached probe blind the way another tool would, by detaching its
// programs (dropping its links) while kpathd keeps its maps.
#pragma once

#include "probes/collect/bpf_probe.h"

namespace kpath {

struct BpfProbeLinksForTest {
  static void Drop(BpfProbe& probe) { probe.links_.clear(); }
};

}  // namespace kpath
