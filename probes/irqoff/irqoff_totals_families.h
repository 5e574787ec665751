// Metric families built from the kernel's per-CPU totals of IRQ-off regions (irqoff_totals): the
// length histogram, and the per-CPU view (seed 001: the stalls hit the CPU that RPS/RFS pinned the
// service's flows to), kpath_irqoff_cpu_regions_total and kpath_irqoff_cpu_region_seconds_total.
#pragma once

#include <linux/types.h>

#include <span>
#include <vector>

#include "probes/collect/metric_families.h"
#include "probes/irqoff/irqoff.h"

namespace kpath {

// Adds one kpath_irqoff_seconds histogram sample, with `labels`, from `totals`' buckets and
// summed length.
void AddRegionHistogram(const LabelPairs& labels, const irqoff_totals& totals,
                        FamilyBuilder& family);

// Appends both per-CPU families from `per_cpu` (the irqoff_totals map's value of each possible
// CPU, indexed by CPU): a series for every CPU in `online` (ascending), so that a CPU's first
// region is an increase from 0 that rate() sees, and for every CPU that counted regions and has
// gone offline since. None for a possible CPU that never counted one and is offline: a VM with 2
// of 40 possible CPUs online exports 2 series of each.
void AppendPerCpuFamilies(std::span<const irqoff_totals> per_cpu, const std::vector<int>& online,
                          MetricFamilies& out);

}  // namespace kpath
