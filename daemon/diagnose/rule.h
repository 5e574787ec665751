// What every diagnose rule shares: the watch it reads (two collections, the observation and the
// thresholds), the probe checks, and the number formats of the report. Each pathology's rule lives
// in its own file and fills in a Finding that Diagnose() has already named (rules.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "daemon/diagnose.h"
#include "daemon/diagnose/samples.h"

namespace kpath::diagnose {

class Watch {
 public:
  Watch(const Observation& o, const DiagnoseThresholds& t)
      : observation(o), thresholds(t), first(o.first), last(o.last) {}

  const Observation& observation;
  const DiagnoseThresholds& thresholds;
  const Samples first;  // the collection at the start of the watch
  const Samples last;   // the collection at the end

  // The watch's length, never 0 (rates divide by it).
  double Seconds() const;
  // How much `family`, summed by `keys` over the samples `keep` accepts, grew during the watch.
  template <typename Keep>
  Groups Growth(const MetricSpec& family, const std::vector<std::string>& keys, Keep keep) const {
    return diagnose::Growth(SumBy(first, family, keys, keep), SumBy(last, family, keys, keep));
  }
  Groups Growth(const MetricSpec& family, const std::vector<std::string>& keys) const {
    return diagnose::Growth(SumBy(first, family, keys), SumBy(last, family, keys));
  }

  bool Attached(const std::string& probe) const;
  // Why `probe` could not check anything: off by configuration, or not attached.
  std::string NotAttached(const std::string& probe) const;
  // For a rule that needs `probe`: false, with `f` marked not checked, when it is not attached.
  bool Require(const std::string& probe, Finding& f) const;
};

// The events of the observation of `kind` (JSON lines), oldest first.
std::vector<std::string> EventsOf(const Observation& o, std::string_view kind);

std::string Bytes(double b);
std::string Seconds(double s);
std::string Rate(double per_second);
std::string Count(double n);

// The rules, one a pathology, in the report's order.
void PercpuAndChurn(const Watch& w, Finding& f);   // seed 000
void IrqOff(const Watch& w, Finding& f);           // seeds 001, 004
void SlabinfoReaders(const Watch& w, Finding& f);  // seed 001
void ForeignHooks(const Watch& w, Finding& f);     // seed 002
void MadviseTlb(const Watch& w, Finding& f);       // seed 003

}  // namespace kpath::diagnose
