// The foreign-hook inventory's metric families (seed 002; docs/metrics.md).
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::hooks_metrics {

inline constexpr MetricSpec kHiddenKprobes{
    "kpath_hidden_kprobes",
    "Kprobes and kretprobes registered by anything but kpathd (kprobes/list, tracefs kprobe "
    "events, BPF kprobes), de-duplicated.",
    MetricType::kGauge};
inline constexpr MetricSpec kHiddenKprobesDisabled{
    "kpath_hidden_kprobes_disabled",
    "Of kpath_hidden_kprobes, those registered but disarmed ([DISABLED] or [GONE]).",
    MetricType::kGauge};
inline constexpr MetricSpec kKprobesEnabled{
    "kpath_kprobes_enabled",
    "The kernel's global kprobes switch (debugfs kprobes/enabled): 0 disarms every kprobe.",
    MetricType::kGauge};
inline constexpr MetricSpec kForeignHooks{
    "kpath_foreign_hooks",
    "Kernel hooks not placed by kpathd, by kind; hot: on a configured hot function or tracepoint "
    "(hooks.hot_functions).",
    MetricType::kGauge};
inline constexpr MetricSpec kForeignHookInfo{
    "kpath_foreign_hook_info",
    "Foreign kernel hooks by kind, target and owner (the process holding them, unknown if none); "
    "always 1, identical hooks share a series (kpath_foreign_hooks counts them).",
    MetricType::kGauge};
inline constexpr MetricSpec kForeignHookSetInfo{
    "kpath_foreign_hook_set_info",
    "The node's whole set of foreign hooks as one value: fingerprint is a 64-bit FNV-1a hash of "
    "its distinct (kind, target, owner), sorted; hooks is how many. Equal sets, equal "
    "fingerprints. Always 1.",
    MetricType::kGauge};
inline constexpr MetricSpec kForeignHookInfoOmitted{
    "kpath_foreign_hook_info_omitted",
    "Foreign hooks left out of kpath_foreign_hook_info (hooks.max_info_series).",
    MetricType::kGauge};
inline constexpr MetricSpec kForeignBpfRunSecondsTotal{
    "kpath_foreign_bpf_run_seconds_total",
    "CPU time spent in BPF programs not loaded by kpathd, from the kernel's run-time statistics; "
    "sampled=\"true\": estimated from duty-cycled statistics (hooks.bpf_stats: sampled).",
    MetricType::kCounter};
inline constexpr MetricSpec kForeignBpfRunsTotal{
    "kpath_foreign_bpf_runs_total",
    "Runs of BPF programs not loaded by kpathd (see kpath_foreign_bpf_run_seconds_total).",
    MetricType::kCounter};
inline constexpr MetricSpec kForeignBpfRunSecondsEvictedTotal{
    "kpath_foreign_bpf_run_seconds_evicted_total",
    "CPU seconds of the kpath_foreign_bpf_run_seconds_total series that ended when a label value "
    "left the top-N, by their other form: their totals at that moment (the other series gets only "
    "later increments). Exact total: sum(kpath_foreign_bpf_run_seconds_total) + sum(this).",
    MetricType::kCounter};
inline constexpr MetricSpec kForeignBpfRunsEvictedTotal{
    "kpath_foreign_bpf_runs_evicted_total",
    "Runs of the kpath_foreign_bpf_runs_total series that ended when a label value left the top-N, "
    "by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_foreign_bpf_runs_total) + sum(this).",
    MetricType::kCounter};
inline constexpr MetricSpec kForeignBpfStatsCoverageRatio{
    "kpath_foreign_bpf_stats_coverage_ratio",
    "Share of the time the kernel's BPF run-time statistics were on for the last figures: 1 "
    "exact, below 1 sampled and scaled, 0 none.",
    MetricType::kGauge};
inline constexpr MetricSpec kForeignHookSourceAvailable{
    "kpath_foreign_hook_source_available",
    "1 if the inventory could read this source on its last refresh.", MetricType::kGauge};
inline constexpr MetricSpec kForeignHookProcessesScanned{
    "kpath_foreign_hook_processes_scanned",
    "Processes whose open files the last refresh scanned for BPF owners (0 when it reused the "
    "previous scan: the BPF objects had not changed).",
    MetricType::kGauge};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {kHiddenKprobes,
                                      kHiddenKprobesDisabled,
                                      kKprobesEnabled,
                                      kForeignHooks,
                                      kForeignHookInfo,
                                      kForeignHookSetInfo,
                                      kForeignHookInfoOmitted,
                                      kForeignBpfRunSecondsTotal,
                                      kForeignBpfRunsTotal,
                                      kForeignBpfStatsCoverageRatio,
                                      kForeignHookSourceAvailable,
                                      kForeignHookProcessesScanned,
                                      kForeignBpfRunSecondsEvictedTotal,
                                      kForeignBpfRunsEvictedTotal};

}  // namespace kpath::hooks_metrics
