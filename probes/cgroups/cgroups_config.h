// Configuration `cgroups:` (cgroup churn, seed 000). Applies on reload.
#pragma once

namespace kpath {

struct CgroupsConfig {
  // A unit whose cgroups are made at this many per second or more over a sampling interval is in
  // a churn burst: a cgroup_churn_burst_start event, and an end event when it falls below.
  int churn_burst_per_second = 10;
  bool operator==(const CgroupsConfig&) const = default;
};

}  // namespace kpath
