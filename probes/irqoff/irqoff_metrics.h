// The irqoff probe's metric families (seeds 001, 004; docs/metrics.md).
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::irqoff_metrics {

inline constexpr MetricSpec kSeconds{
    "kpath_irqoff_seconds",
    "Length of each IRQ-disabled region at or above the threshold (estimated to +-period/2 by the "
    "timer methods).",
    MetricType::kHistogram};
inline constexpr MetricSpec kMaxSeconds{
    "kpath_irqoff_max_seconds",
    "Longest IRQ-disabled region in the last irqoff.max_window (60 s by default; 0 when none "
    "reached the threshold).",
    MetricType::kGauge};
inline constexpr MetricSpec kRegionsTotal{
    "kpath_irqoff_regions_total",
    "IRQ-disabled regions at or above the threshold, by process and culprit (the kernel function "
    "that held IRQs off; unknown when the stack does not show it).",
    MetricType::kCounter};
inline constexpr MetricSpec kRegionsEvictedTotal{
    "kpath_irqoff_regions_evicted_total",
    "Regions of the kpath_irqoff_regions_total series that ended when a label value left the "
    "top-N, by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_irqoff_regions_total) + sum(this).",
    MetricType::kCounter};
// Per CPU (seed 001: RPS/RFS pinned the service's flows to the CPU that stalled). Separate
// families, not a cpu label on the two above: with `cpu` the histogram alone is 14 series per
// CPU, and kpath_irqoff_regions_total up to (comm x culprit) per CPU (README.md, "Which CPU").
inline constexpr MetricSpec kCpuRegionsTotal{
    "kpath_irqoff_cpu_regions_total",
    "IRQ-disabled regions at or above the threshold, by the CPU they held IRQs off on (counted in "
    "the kernel: exact, also when a region's details were lost).",
    MetricType::kCounter};
inline constexpr MetricSpec kCpuRegionSecondsTotal{
    "kpath_irqoff_cpu_region_seconds_total",
    "Summed length of those regions, by CPU: its rate is the share of the CPU's time spent with "
    "IRQs off in regions at or above the threshold.",
    MetricType::kCounter};
inline constexpr MetricSpec kIgnoredLateTicksTotal{
    "kpath_irqoff_ignored_late_ticks_total",
    "Late timer ticks not counted as regions: the CPU was idle (idle), the hypervisor did not run "
    "the vCPU (steal: its steal clock; host_preempted: its preempted flag, seen by another CPU), "
    "or another CPU saw this one preemptible while its tick was overdue, so IRQs were on "
    "(preemptible: a hypervisor stall or exit), or on a virtual machine its neighbour CPUs' ticks "
    "were late with it (vm_pause: the hypervisor paused the VM).",
    MetricType::kCounter};
inline constexpr MetricSpec kTimerTicksTotal{
    "kpath_irqoff_timer_ticks_total",
    "Ticks of the detector's own per-CPU timer (its extra timer interrupts).",
    MetricType::kCounter};
inline constexpr MetricSpec kNmiSamplesTotal{"kpath_irqoff_nmi_samples_total",
                                             "Hardware NMI samples taken by the detector.",
                                             MetricType::kCounter};
inline constexpr MetricSpec kThresholdSeconds{
    "kpath_irqoff_threshold_seconds", "Shortest IRQ-disabled region reported.", MetricType::kGauge};
inline constexpr MetricSpec kResolutionSeconds{
    "kpath_irqoff_resolution_seconds",
    "How precisely a region's length is known (+-): half the timer period, 0 for exact "
    "tracepoints.",
    MetricType::kGauge};
inline constexpr MetricSpec kDetectorInfo{
    "kpath_irqoff_detector_info",
    "How IRQ-off regions are measured: method, steal-time correction, witness (what other CPUs "
    "read of a CPU whose tick is overdue), idle detection, context-switch tracking and whether "
    "late ticks of a VM's CPU and its neighbours together are ignored as a pause of the VM; always "
    "1.",
    MetricType::kGauge};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {
    kSeconds,         kMaxSeconds,          kRegionsTotal,     kIgnoredLateTicksTotal,
    kTimerTicksTotal, kNmiSamplesTotal,     kThresholdSeconds, kResolutionSeconds,
    kDetectorInfo,    kRegionsEvictedTotal, kCpuRegionsTotal,  kCpuRegionSecondsTotal};

}  // namespace kpath::irqoff_metrics
