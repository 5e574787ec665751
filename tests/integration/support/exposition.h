// Reading kpathd's /metrics in the tests (the Prometheus text format): the samples of one
// family, label values unescaped, and sums over them.
#pragma once

#include <map>
#include <string>
#include <vector>

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

}  // namespace kpath::testing
