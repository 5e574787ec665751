#include "daemon/snapshot.h"

#include <algorithm>

#include "fmt/format.h"

namespace kpath {

void Snapshot::Publish(MetricFamilies families) {
  auto next = std::make_shared<const MetricFamilies>(std::move(families));
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(next);
  published_.store(std::max<std::chrono::steady_clock::rep>(
      1, std::chrono::steady_clock::now().time_since_epoch().count()));
}

std::optional<std::chrono::steady_clock::time_point> Snapshot::PublishedAt() const {
  const std::chrono::steady_clock::rep ticks = published_.load();
  if (ticks == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(ticks));
}

std::string SnapshotNotReadyReason(std::optional<std::chrono::steady_clock::time_point> published,
                                   std::chrono::steady_clock::time_point now,
                                   std::chrono::steady_clock::duration stale_after) {
  if (!published) return "starting: the probes are being attached, no snapshot served yet";
  const auto age = now - *published;
  if (age <= stale_after) return "";
  using Seconds = std::chrono::duration<double>;
  return fmt::format(
      "the snapshot served is {:.0f}s old (stale after {:.0f}s): collection is stuck",
      Seconds(age).count(), Seconds(stale_after).count());
}

std::chrono::steady_clock::duration SnapshotStaleAfter(
    std::chrono::steady_clock::duration sampling_interval) {
  return std::max<std::chrono::steady_clock::duration>(3 * sampling_interval,
                                                       std::chrono::seconds(15));
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
