// The cgroup_churn probe's and the cgroup counter's metric families (seed 000; docs/metrics.md).
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::cgroups_metrics {

inline constexpr MetricSpec kCgroupMkdirTotal{
    "kpath_cgroup_mkdir_total",
    "cgroups created since kpathd attached, by process and systemd unit (transient names folded, "
    "see README).",
    MetricType::kCounter};
inline constexpr MetricSpec kCgroupRmdirTotal{
    "kpath_cgroup_rmdir_total",
    "cgroups removed since kpathd attached, by process and systemd unit (transient names folded, "
    "see README).",
    MetricType::kCounter};
inline constexpr MetricSpec kCgroupMkdirEvictedTotal{
    "kpath_cgroup_mkdir_evicted_total",
    "cgroups created of the kpath_cgroup_mkdir_total series that ended when a label value left the "
    "top-N, by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_cgroup_mkdir_total) + sum(this).",
    MetricType::kCounter};
inline constexpr MetricSpec kCgroupRmdirEvictedTotal{
    "kpath_cgroup_rmdir_evicted_total",
    "cgroups removed of the kpath_cgroup_rmdir_total series that ended when a label value left the "
    "top-N, by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_cgroup_rmdir_total) + sum(this).",
    MetricType::kCounter};
inline constexpr MetricSpec kCgroupChurnPerSecond{
    "kpath_cgroup_churn_per_second",
    "cgroups created per second: least-squares slope of the cgroup mkdir count over the window "
    "(meminfo.percpu_growth_window).",
    MetricType::kGauge};
inline constexpr MetricSpec kCgroupChurnUnlabelledTotal{
    "kpath_cgroup_churn_unlabelled_total",
    "cgroup mkdirs and rmdirs counted without their unit (or process and unit) because a "
    "per-interval map was full; they are in the unit=\"other\" series.",
    MetricType::kCounter};
inline constexpr MetricSpec kCgroups{
    "kpath_cgroups",
    "Cgroups per controller: live (a directory exists) or dying (removed, still held by the "
    "kernel, with its memory). controller=\"cgroup2\" counts the v2 hierarchy's cgroups.",
    MetricType::kGauge};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {
    kCgroupMkdirTotal,           kCgroupRmdirTotal, kCgroupChurnPerSecond,
    kCgroupChurnUnlabelledTotal, kCgroups,          kCgroupMkdirEvictedTotal,
    kCgroupRmdirEvictedTotal};

}  // namespace kpath::cgroups_metrics
