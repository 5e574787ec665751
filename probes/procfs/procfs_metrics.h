// The metric families read from /proc: meminfo, interrupts, stat (seeds 000, 003), and kpathd's
// own process as every Prometheus client exports it (docs/metrics.md).
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::procfs_metrics {

inline constexpr MetricSpec kProcessCpuSecondsTotal{
    "process_cpu_seconds_total",
    "CPU time kpathd used, user and system (its BPF programs run in the traced tasks and are "
    "counted in kpath_bpf_program_run_seconds_total instead).",
    MetricType::kCounter};
inline constexpr MetricSpec kProcessResidentMemoryBytes{
    "process_resident_memory_bytes", "kpathd's resident memory.", MetricType::kGauge};
inline constexpr MetricSpec kProcessVirtualMemoryBytes{
    "process_virtual_memory_bytes", "kpathd's virtual memory size.", MetricType::kGauge};
inline constexpr MetricSpec kProcessThreads{"process_threads", "kpathd's threads.",
                                            MetricType::kGauge};
inline constexpr MetricSpec kProcessStartTimeSeconds{
    "process_start_time_seconds", "When kpathd started, in seconds since the epoch.",
    MetricType::kGauge};
inline constexpr MetricSpec kProcessOpenFds{
    "process_open_fds",
    "File descriptors kpathd holds open (BPF maps, programs and links, perf events, sockets, "
    "files).",
    MetricType::kGauge};
inline constexpr MetricSpec kProcessMaxFds{
    "process_max_fds", "kpathd's limit on open file descriptors (soft RLIMIT_NOFILE).",
    MetricType::kGauge};
inline constexpr MetricSpec kCpuSecondsTotal{
    "kpath_cpu_seconds_total",
    "CPU time of all CPUs by mode, from /proc/stat. guest and guest_nice are also counted in user "
    "and nice.",
    MetricType::kCounter};
inline constexpr MetricSpec kMeminfoBytes{"kpath_meminfo_bytes", "Fields of /proc/meminfo in bytes",
                                          MetricType::kGauge};
inline constexpr MetricSpec kPercpuBytes{
    "kpath_percpu_bytes", "Memory backing percpu allocations, in bytes (Percpu in /proc/meminfo)",
    MetricType::kGauge};
inline constexpr MetricSpec kPercpuGrowthBytesPerSecond{
    "kpath_percpu_growth_bytes_per_second",
    "Least-squares slope of kpath_percpu_bytes over the growth window, in bytes per second",
    MetricType::kGauge};
inline constexpr MetricSpec kTlbShootdownsTotal{
    "kpath_tlb_shootdowns_total",
    "TLB shootdown interrupts received, all CPUs (the TLB row of /proc/interrupts).",
    MetricType::kCounter};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {kProcessCpuSecondsTotal,
                                      kProcessResidentMemoryBytes,
                                      kProcessVirtualMemoryBytes,
                                      kProcessThreads,
                                      kProcessStartTimeSeconds,
                                      kProcessOpenFds,
                                      kProcessMaxFds,
                                      kCpuSecondsTotal,
                                      kMeminfoBytes,
                                      kPercpuBytes,
                                      kPercpuGrowthBytesPerSecond,
                                      kTlbShootdownsTotal};

}  // namespace kpath::procfs_metrics
