// The percpu_alloc probe's metric families (seed 000; docs/metrics.md).
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::percpu_metrics {

inline constexpr MetricSpec kAllocsTotal{
    "kpath_percpu_allocs_total",
    "Percpu allocations since kpathd attached, by process and kernel caller.",
    MetricType::kCounter};
inline constexpr MetricSpec kAllocBytesTotal{
    "kpath_percpu_alloc_bytes_total",
    "Bytes of percpu memory allocated (summed over all CPUs) since kpathd attached, by process "
    "and kernel caller.",
    MetricType::kCounter};
inline constexpr MetricSpec kAllocsEvictedTotal{
    "kpath_percpu_allocs_evicted_total",
    "Allocations of the kpath_percpu_allocs_total series that ended when a label value left the "
    "top-N, by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_percpu_allocs_total) + sum(this).",
    MetricType::kCounter};
inline constexpr MetricSpec kAllocBytesEvictedTotal{
    "kpath_percpu_alloc_bytes_evicted_total",
    "Bytes of the kpath_percpu_alloc_bytes_total series that ended when a label value left the "
    "top-N, by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_percpu_alloc_bytes_total) + sum(this).",
    MetricType::kCounter};
inline constexpr MetricSpec kOutstandingBytes{
    "kpath_percpu_outstanding_bytes",
    "Percpu bytes kpathd saw allocated and not yet freed, by caller.", MetricType::kGauge};
inline constexpr MetricSpec kUntrackedFreesTotal{
    "kpath_percpu_untracked_frees_total",
    "Percpu frees of memory kpathd did not see allocated (allocated before it started).",
    MetricType::kCounter};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {kAllocsTotal,        kAllocBytesTotal,
                                      kOutstandingBytes,   kUntrackedFreesTotal,
                                      kAllocsEvictedTotal, kAllocBytesEvictedTotal};

}  // namespace kpath::percpu_metrics
