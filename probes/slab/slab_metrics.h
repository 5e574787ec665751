// The slab collector's and the slabinfo_readers probe's metric families (seed 001;
// docs/metrics.md).
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::slab_metrics {

inline constexpr MetricSpec kSlabinfoReadsTotal{
    "kpath_slabinfo_reads_total",
    "Opens of /proc/slabinfo by other processes: each makes the kernel walk every slab cache's "
    "partial slabs with IRQs off (seed 001).",
    MetricType::kCounter};
inline constexpr MetricSpec kSlabinfoReadsEvictedTotal{
    "kpath_slabinfo_reads_evicted_total",
    "Opens of the kpath_slabinfo_reads_total series that ended when a label value left the top-N, "
    "by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_slabinfo_reads_total) + sum(this).",
    MetricType::kCounter};
inline constexpr MetricSpec kSlabObjects{
    "kpath_slab_objects",
    "Object slots in a slab cache's slabs (configured caches plus the largest others).",
    MetricType::kGauge};
inline constexpr MetricSpec kSlabBytes{"kpath_slab_bytes", "Memory held by a slab cache's slabs.",
                                       MetricType::kGauge};
inline constexpr MetricSpec kSlabReadDurationSeconds{
    "kpath_slab_read_duration_seconds",
    "How long kpathd's last reading of the slab caches took, by source (sysfs: O(1) counters; "
    "slabinfo: /proc/slabinfo, which walks partial slabs with IRQs off).",
    MetricType::kGauge};
inline constexpr MetricSpec kSlabReadIntervalSeconds{
    "kpath_slab_read_interval_seconds",
    "Time between readings of the slab caches now: slab.interval, multiplied while reads are "
    "slower than slab.max_read_time.",
    MetricType::kGauge};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {kSlabinfoReadsTotal,
                                      kSlabObjects,
                                      kSlabBytes,
                                      kSlabReadDurationSeconds,
                                      kSlabReadIntervalSeconds,
                                      kSlabinfoReadsEvictedTotal};

}  // namespace kpath::slab_metrics
