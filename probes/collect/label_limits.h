// Per-label top-N limits (configuration `labels:`): each label keeps at most this many values
// and folds the rest into "other" (see FoldedCounters).
#pragma once

namespace kpath {

struct LabelLimits {
  int comm = 20;    // process name
  int caller = 20;  // kernel function
  int unit = 30;    // systemd unit
  int pod = 30;     // Kubernetes pod (and its namespace and container), kubernetes.pod_labels
  bool operator==(const LabelLimits&) const = default;
};

}  // namespace kpath
