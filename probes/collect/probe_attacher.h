// Picks how a BPF probe attaches: the probe lists its ways (AttachPlan) in order of preference,
// the kernel is asked whether it has what each needs, and the first that loads and attaches wins.
// One log line per probe says what was chosen and why the others were skipped.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "probes/collect/collector.h"
#include "probes/kernel/kernel_features.h"
#include "probes/kernel/mechanism.h"

namespace kpath {

class AttachableProbe {
 public:
  virtual ~AttachableProbe() = default;
  virtual std::string_view ProbeName() const = 0;
  // Every way this probe can attach, best first.
  virtual std::vector<AttachPlan> Plans() const = 0;
  // Ok if the kernel (the probe's own KernelFeatures) has what `plan` needs; else why not (the
  // plan is skipped untried).
  virtual absl::Status Supported(const AttachPlan& plan) = 0;
  // Loads and attaches. On error nothing of this attempt stays loaded.
  virtual absl::Status Attach(const AttachPlan& plan) = 0;
  virtual void Detach() = 0;
};

// Tries the probe's plans in order, restricted to `allowed` mechanisms when non-empty (the
// configuration's `probes.<name>.mechanisms`). Never fails: the result says what attached, or
// mechanism kNone with every reason in `detail`.
ProbeState AttachFirstSupported(AttachableProbe& probe, const std::vector<Mechanism>& allowed);

// AttachFirstSupported for a collector's Start(): records the outcome in `state` and returns
// Unavailable with every reason when nothing attached (the collector then reports success 0),
// except when the probe is off by configuration (state.excluded_by_config).
absl::Status StartProbe(AttachableProbe& probe, const std::vector<Mechanism>& allowed,
                        ProbeState& state);

// An attach that worked but whose programs do not see the events the plan is for: the probe's
// own check event never reached them (a function off the path of the calls it should see, e.g.
// inlined into its caller). A plan that fails so is skipped like any other; IsBlindHook tells it
// from a mechanism that did not load or attach (the status carries a payload, not a code: a
// libbpf error can have any code).
absl::Status BlindHookError(std::string_view why);
bool IsBlindHook(const absl::Status& status);

// Routes libbpf's own messages to spdlog at debug level: a fallback that fails is expected and
// already summarised by AttachFirstSupported, so libbpf's details are for --log-level debug.
void RouteLibbpfLogsToSpdlog();

}  // namespace kpath
