// The latest collection, served to every scraper. The sampler publishes a whole new snapshot each
// interval; a scrape copies the current one and never waits for the kernel.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "probes/collect/metric_families.h"
#include "prometheus/collectable.h"

namespace kpath {

class Snapshot final : public prometheus::Collectable {
 public:
  void Publish(MetricFamilies families);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const MetricFamilies> current_ = std::make_shared<const MetricFamilies>();
};

}  // namespace kpath
