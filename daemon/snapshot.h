// The latest collection, served to every scraper. The sampler publishes a whole new snapshot each
// interval; a scrape copies the current one and never waits for the kernel.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "probes/collect/metric_families.h"
#include "prometheus/collectable.h"

namespace kpath {

class Snapshot final : public prometheus::Collectable {
 public:
  void Publish(MetricFamilies families);
  std::vector<prometheus::MetricFamily> Collect() const override;
  // When the snapshot served was published (steady clock); nullopt before the first.
  std::optional<std::chrono::steady_clock::time_point> PublishedAt() const;

 private:
  // steady_clock ticks since its epoch; 0: nothing published yet. Read by /-/ready's thread.
  std::atomic<std::chrono::steady_clock::rep> published_{0};
  mutable std::mutex mu_;
  std::shared_ptr<const MetricFamilies> current_ = std::make_shared<const MetricFamilies>();
};

// Why a snapshot published at `published` makes kpathd not ready at `now` ("" when ready):
// nothing published yet (the probes are still starting), or older than `stale_after`.
std::string SnapshotNotReadyReason(std::optional<std::chrono::steady_clock::time_point> published,
                                   std::chrono::steady_clock::time_point now,
                                   std::chrono::steady_clock::duration stale_after);

// How old a snapshot may be for kpathd to be ready: three sampling intervals, and at least 15 s
// (a slow collection of a big /proc/slabinfo must not flip readiness).
std::chrono::steady_clock::duration SnapshotStaleAfter(
    std::chrono::steady_clock::duration sampling_interval);

}  // namespace kpath
