// The event log's families (docs/metrics.md, "Events").
#pragma once

#include "probes/collect/metric_families.h"

namespace kpath::events_metrics {

inline constexpr MetricSpec kEventsTotal{
    "kpath_events_total",
    "Events kpathd recorded (served at /events and written to the journal), by kind.",
    MetricType::kCounter};
inline constexpr MetricSpec kEventsDroppedTotal{
    "kpath_events_dropped_total",
    "Events not kept or not written: ring_overwritten (the oldest, pushed out of the /events "
    "ring), output_rate_limited and output_failed (not written to the journal or stderr).",
    MetricType::kCounter};

// Every family above, for the catalogue test (tests/unit/metric_catalogue_test.cpp).
inline constexpr MetricSpec kAll[] = {kEventsTotal, kEventsDroppedTotal};

}  // namespace kpath::events_metrics
