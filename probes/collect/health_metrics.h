// The families every collector and probe shares (kpathd's own health), each declared once with
// one HELP text: the catalogue's shared part (docs/metrics.md, "Daemon health").
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::health_metrics {

inline constexpr MetricSpec kBuildInfo{
    "kpath_build_info", "kpathd build and the kernel it runs on; always 1.", MetricType::kGauge};
inline constexpr MetricSpec kCollectorSuccess{
    "kpath_collector_success", "1 if the collector's last collection worked.", MetricType::kGauge};
inline constexpr MetricSpec kCollectorDurationSeconds{
    "kpath_collector_duration_seconds", "How long the collector's last collection took.",
    MetricType::kGauge};
inline constexpr MetricSpec kLastSampleTimestampSeconds{
    "kpath_last_sample_timestamp_seconds",
    "When the snapshot served was collected, in seconds since the Unix epoch (the host's clock).",
    MetricType::kGauge};
inline constexpr MetricSpec kProbeAttached{
    "kpath_probe_attached", "1 if the probe is attached; mechanism is how (none: not attached).",
    MetricType::kGauge};
inline constexpr MetricSpec kProbeSupported{
    "kpath_probe_supported",
    "1 if this kernel offers at least one of the probe's mechanisms (asked when the probe last "
    "started); 0: the kernel cannot serve it, so it is not attached and nothing is broken.",
    MetricType::kGauge};
inline constexpr MetricSpec kProbeSelfTestSuccess{
    "kpath_probe_selftest_success",
    "1 if the probe's last self-test (an event kpathd caused itself, about once a minute) reached "
    "its programs; only for attached probes that have a self-test.",
    MetricType::kGauge};
inline constexpr MetricSpec kProbeExcludedByConfig{
    "kpath_probe_excluded_by_config",
    "1 if the probe is not attached only because probes.<probe>.mechanisms leaves out every "
    "mechanism this kernel supports (off by choice).",
    MetricType::kGauge};
inline constexpr MetricSpec kBpfProgramRunSecondsTotal{
    "kpath_bpf_program_run_seconds_total",
    "CPU time spent in kpathd's own BPF programs: exact while the kernel's BPF run-time "
    "statistics are on (kpath_bpf_stats_enabled 1), else estimated from the slices of "
    "hooks.bpf_stats: sampled.",
    MetricType::kCounter};
inline constexpr MetricSpec kBpfProgramRunsTotal{
    "kpath_bpf_program_runs_total",
    "Runs of kpathd's own BPF programs: exact while the kernel's BPF run-time statistics are on, "
    "else estimated from the slices of hooks.bpf_stats: sampled.",
    MetricType::kCounter};
inline constexpr MetricSpec kBpfStatsEnabled{
    "kpath_bpf_stats_enabled",
    "1 if the kernel keeps BPF run-time statistics (sysctl kernel.bpf_stats_enabled, or kpathd "
    "holding them on with hooks.bpf_stats: always).",
    MetricType::kGauge};
inline constexpr MetricSpec kEventsLostTotal{
    "kpath_events_lost_total",
    "Events not (fully) counted, by probe and reason: tracking_map_full (percpu allocations not "
    "tracked to their free, probes.percpu_alloc max_tracked_allocations), iovec_read_error "
    "(process_madvise calls whose iovecs could not be read: call counted, bytes partial), "
    "buffer_full (IRQ-off regions whose details found the buffer to user space full: counted as "
    "comm and culprit \"other\"), path_unreadable (opens whose path the syscall tracepoint could "
    "not read; some may have been of /proc/slabinfo).",
    MetricType::kCounter};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {kBuildInfo,
                                      kCollectorSuccess,
                                      kCollectorDurationSeconds,
                                      kProbeAttached,
                                      kProbeExcludedByConfig,
                                      kBpfProgramRunSecondsTotal,
                                      kBpfProgramRunsTotal,
                                      kBpfStatsEnabled,
                                      kEventsLostTotal,
                                      kLastSampleTimestampSeconds,
                                      kProbeSupported,
                                      kProbeSelfTestSuccess};

}  // namespace kpath::health_metrics
