#include "daemon/snapshot.h"

namespace kpath {

void Snapshot::Publish(MetricFamilies families) {
  auto next = std::make_shared<const MetricFamilies>(std::move(families));
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(next);
}

std::vector<prometheus::MetricFamily> Snapshot::Collect() const {
  std::shared_ptr<const MetricFamilies> current;
  {
    std::lock_guard<std::mutex> lock(mu_);
    current = current_;
  }
  // The copy happens outside the lock: a scrape never holds up the sampler.
  return *current;
}

}  // namespace kpath
