#include "probes/kernel/mechanism.h"

#include <array>
#include <utility>

namespace kpath {
namespace {
constexpr std::array<std::pair<Mechanism, std::string_view>, 8> kNames{{
    {Mechanism::kTpBtf, "tp_btf"},
    {Mechanism::kRawTp, "raw_tp"},
    {Mechanism::kTracepoint, "tracepoint"},
    {Mechanism::kFentry, "fentry"},
    {Mechanism::kKprobe, "kprobe"},
    {Mechanism::kPerfEvent, "perf_event"},
    {Mechanism::kProcfs, "procfs"},
    {Mechanism::kNone, "none"},
}};
}  // namespace

std::string_view MechanismName(Mechanism m) {
  for (const auto& [mech, name] : kNames) {
    if (mech == m) return name;
  }
  return "none";
}

std::optional<Mechanism> ParseMechanism(std::string_view name) {
  for (const auto& [mech, n] : kNames) {
    if (n == name && mech != Mechanism::kNone) return mech;
  }
  return std::nullopt;
}

std::vector<std::string_view> MechanismNames() {
  std::vector<std::string_view> out;
  for (const auto& [mech, name] : kNames) {
    if (mech != Mechanism::kNone) out.push_back(name);
  }
  return out;
}

}  // namespace kpath
