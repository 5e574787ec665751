// Reading kpathd's /metrics in the tests (the Prometheus text format): the samples of one
// family, label values unescaped, sums over them, and scraping until a condition holds.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/kpathd_process.h"

namespace kpath::testing {

struct Sample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<Sample> Samples(const std::string& exposition, const std::string& name);

// The sum of the samples whose labels include every pair of `match`.
double Sum(const std::vector<Sample>& samples,
           const std::map<std::string, std::string>& match = {});
double Sum(const std::string& exposition, const std::string& name,
           const std::map<std::string, std::string>& match = {});
// The exact count of a folded counter family `name` (an `..._total`): its samples plus those of
// its `..._evicted_total`, the series that left the top-N (docs/metrics.md, "Folded labels and
// exact totals"), whose labels include every pair of `match`.
double SumFolded(const std::string& exposition, const std::string& name,
                 const std::map<std::string, std::string>& match = {});

// Scrapes /metrics until `done` holds for a scrape or `timeout` passes; returns the last scrape.
std::string ScrapeUntil(KpathdProcess& kpathd, const std::function<bool(const std::string&)>& done,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace kpath::testing
