#include "support/exposition.h"

#include <sstream>
#include <thread>

namespace kpath::testing {

std::vector<Sample> Samples(const std::string& exposition, const std::string& name) {
  std::vector<Sample> samples;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0 && line.rfind(name + " ", 0) != 0) continue;
    Sample sample;
    size_t i = name.size();
    if (line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        std::string key = line.substr(i, eq - i);
        std::string value;
        for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          value += line[i];
        }
        sample.labels[key] = value;
        i += 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;
    }
    sample.value = std::stod(line.substr(i));
    samples.push_back(std::move(sample));
  }
  return samples;
}

double Sum(const std::vector<Sample>& samples, const std::map<std::string, std::string>& match) {
  double sum = 0;
  for (const Sample& s : samples) {
    bool ok = true;
    for (const auto& [k, v] : match) ok = ok && s.labels.count(k) && s.labels.at(k) == v;
    if (ok) sum += s.value;
  }
  return sum;
}

double Sum(const std::string& exposition, const std::string& name,
           const std::map<std::string, std::string>& match) {
  return Sum(Samples(exposition, name), match);
}

double SumFolded(const std::string& exposition, const std::string& name,
                 const std::map<std::string, std::string>& match) {
  const std::string evicted = name.substr(0, name.rfind("_total")) + "_evicted_total";
  return Sum(exposition, name, match) + Sum(exposition, evicted, match);
}

std::string ScrapeUntil(KpathdProcess& kpathd, const std::function<bool(const std::string&)>& done,
                        std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto body = kpathd.Scrape()) {
      last = *body;
      if (done(last)) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return last;
}

}  // namespace kpath::testing
