#include "probes/collect/folded_counters.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

void AppendSamples(const std::vector<std::string>& names,
                   const std::map<std::vector<std::string>, std::vector<uint64_t>>& counters,
                   FamilyBuilder& family, size_t field) {
  for (const auto& [key, values] : counters) {
    LabelPairs labels;
    labels.reserve(names.size());
    // An empty value is an absent label (as Prometheus reads it): not written, so that a process
    // outside any pod has no namespace="" pod="" container="".
    for (size_t i = 0; i < names.size(); ++i) {
      if (!key[i].empty()) labels.emplace_back(names[i], key[i]);
    }
    family.Add(labels, static_cast<double>(values[field]));
  }
}

}  // namespace

FoldedCounters::FoldedCounters(std::vector<std::string> labels, std::vector<size_t> top_n,
                               size_t fields, double decay)
    : labels_(std::move(labels)),
      top_n_(std::move(top_n)),
      fields_(fields),
      decay_(decay),
      totals_(fields, 0),
      activity_(labels_.size()),
      selected_(labels_.size()) {
  top_n_.resize(labels_.size(), 1);
}

void FoldedCounters::SetTopN(std::vector<size_t> top_n) {
  top_n_ = std::move(top_n);
  top_n_.resize(labels_.size(), 1);
}

size_t FoldedCounters::budget() const {
  size_t b = 1;
  for (size_t n : top_n_) b *= n + 1;
  return b;
}

void FoldedCounters::Add(const std::vector<std::string>& values, std::span<const uint64_t> deltas) {
  if (values.size() != labels_.size()) {
    // A caller's bug (a value per label name): counted all the same, under "other", and said
    // once, rather than a series whose labels do not match its family's.
    if (!mismatch_logged_) {
      spdlog::error("internal error: {} label values for the {} labels {}: counted as other",
                    values.size(), labels_.size(), fmt::join(labels_, ","));
      mismatch_logged_ = true;
    }
    AddOther(deltas);
    return;
  }
  std::vector<uint64_t>& p = pending_[values];
  p.resize(fields_, 0);
  for (size_t f = 0; f < fields_ && f < deltas.size(); ++f) p[f] += deltas[f];
}

void FoldedCounters::AddOther(std::span<const uint64_t> deltas) {
  Add(std::vector<std::string>(labels_.size(), kOther), deltas);
}

std::vector<std::string> FoldedCounters::Fold(const std::vector<std::string>& values) const {
  std::vector<std::string> folded(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    folded[i] = selected_[i].count(values[i]) ? values[i] : kOther;
  }
  return folded;
}

void FoldedCounters::EndInterval() {
  ++interval_;
  // Activity: decay everything, then add this interval's field-0 counts.
  for (auto& per_label : activity_) {
    for (auto it = per_label.begin(); it != per_label.end();) {
      it->second *= decay_;
      // Forget values that have been idle for long (bounded memory under a name storm).
      if (it->second < 1e-3) {
        it = per_label.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [values, deltas] : pending_) {
    for (size_t i = 0; i < labels_.size() && i < values.size(); ++i) {
      if (values[i] == kOther) continue;
      activity_[i][values[i]] += static_cast<double>(deltas.empty() ? 0 : deltas[0]) + 1e-2;
    }
  }
  // Each label's top-N by activity. Values already exported rank with twice their activity, so
  // membership changes only when a newcomer is clearly busier (every change moves a series into
  // "other"). Ties are broken by name for determinism.
  for (size_t i = 0; i < labels_.size(); ++i) {
    std::vector<std::pair<double, std::string>> ranked;
    ranked.reserve(activity_[i].size());
    for (const auto& [value, score] : activity_[i]) {
      ranked.emplace_back(selected_[i].count(value) ? 2 * score : score, value);
    }
    size_t n = std::min(top_n_[i], ranked.size());
    std::partial_sort(ranked.begin(), ranked.begin() + static_cast<long>(n), ranked.end(),
                      [](const auto& a, const auto& b) {
                        return a.first != b.first ? a.first > b.first : a.second < b.second;
                      });
    selected_[i].clear();
    for (size_t k = 0; k < n; ++k) selected_[i][ranked[k].second] = true;
  }
  // Route the interval's counts into the exported series.
  for (auto& [values, deltas] : pending_) {
    std::vector<std::string> key = Fold(values);
    std::vector<uint64_t>& s = series_[key];
    s.resize(fields_, 0);
    for (size_t f = 0; f < fields_; ++f) {
      s[f] += deltas[f];
      totals_[f] += deltas[f];
    }
    last_update_[key] = interval_;
  }
  pending_.clear();
  Evict();
}

void FoldedCounters::Evict() {
  // A series one of whose values left its label's top-N ends here: every label shows at most
  // top_n values besides "other". Its past is kept apart, in evicted_, and never added to the
  // "other" series, whose rate would otherwise jump by a lifetime's total (a phantom burst).
  std::vector<std::vector<std::string>> stale;
  for (const auto& [key, values] : series_) {
    if (Fold(key) != key) stale.push_back(key);
  }
  for (const auto& key : stale) {
    std::vector<uint64_t>& e = evicted_[Fold(key)];
    e.resize(fields_, 0);
    const std::vector<uint64_t>& moved = series_[key];
    for (size_t f = 0; f < fields_; ++f) e[f] += moved[f];
    series_.erase(key);
    last_update_.erase(key);
  }
}

void FoldedCounters::AppendTo(FamilyBuilder& family, size_t field) const {
  AppendSamples(labels_, series_, family, field);
}

void FoldedCounters::AppendEvictedTo(FamilyBuilder& family, size_t field) const {
  AppendSamples(labels_, evicted_, family, field);
}

void FoldedCounters::AppendFamilies(const MetricSpec& live, const MetricSpec& evicted, size_t field,
                                    MetricFamilies& out) const {
  FamilyBuilder series(live);
  AppendTo(series, field);
  series.AppendTo(out);
  FamilyBuilder ended(evicted);
  AppendEvictedTo(ended, field);
  ended.AppendTo(out);
}

std::string FoldedCounters::TopValue(size_t label) const {
  std::string best;
  double best_score = 0;
  for (const auto& [value, score] : activity_.at(label)) {
    if (score > best_score || (score == best_score && value < best)) {
      best = value;
      best_score = score;
    }
  }
  return best;
}

}  // namespace kpath
