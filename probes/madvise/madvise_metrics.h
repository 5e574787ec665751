// The madvise and tlb_flush probes' metric families (seed 003; docs/metrics.md).
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::madvise_metrics {

inline constexpr MetricSpec kTlbFlushesTotal{
    "kpath_tlb_flushes_total",
    "TLB flushes by reason (x86 tlb:tlb_flush tracepoint) since kpathd attached. "
    "remote_shootdown: flushes another CPU asked for by IPI.",
    MetricType::kCounter};
inline constexpr MetricSpec kMadviseCallsTotal{
    "kpath_madvise_calls_total", "madvise and process_madvise calls by process (comm) and advice.",
    MetricType::kCounter};
inline constexpr MetricSpec kMadviseBytesTotal{
    "kpath_madvise_bytes_total",
    "Bytes named by madvise calls (the length argument; process_madvise: its iovec lengths).",
    MetricType::kCounter};
inline constexpr MetricSpec kMadviseCallsEvictedTotal{
    "kpath_madvise_calls_evicted_total",
    "Calls of the kpath_madvise_calls_total series that ended when a label value left the top-N, "
    "by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_madvise_calls_total) + sum(this).",
    MetricType::kCounter};
inline constexpr MetricSpec kMadviseBytesEvictedTotal{
    "kpath_madvise_bytes_evicted_total",
    "Bytes of the kpath_madvise_bytes_total series that ended when a label value left the top-N, "
    "by their other form: their totals at that moment (the other series gets only later "
    "increments). Exact total: sum(kpath_madvise_bytes_total) + sum(this).",
    MetricType::kCounter};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {kTlbFlushesTotal, kMadviseCallsTotal, kMadviseBytesTotal,
                                      kMadviseCallsEvictedTotal, kMadviseBytesEvictedTotal};

}  // namespace kpath::madvise_metrics
