#include "probes/collect/probe_attacher.h"

#include <bpf/libbpf.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "absl/strings/cord.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {
constexpr char kBlindHookPayload[] = "kpath/blind-hook";  // absl::string_view is not std's here

std::string PlanName(const AttachPlan& plan) {
  return fmt::format("{} {}", MechanismName(plan.mechanism), plan.target);
}
}  // namespace

absl::Status BlindHookError(std::string_view why) {
  absl::Status s = absl::FailedPreconditionError(fmt::format("attached, but blind: {}", why));
  s.SetPayload(kBlindHookPayload, absl::Cord("1"));
  return s;
}

bool IsBlindHook(const absl::Status& status) {
  return status.GetPayload(kBlindHookPayload).has_value();
}

ProbeState AttachFirstSupported(AttachableProbe& probe, const std::vector<Mechanism>& allowed) {
  std::vector<std::string> skipped;
  std::vector<std::string> excluded_supported;  // supported here, left out by the configuration
  bool excluded_cheap = false;                  // ... and one of them is not `costly`
  bool any_supported = false;                   // the kernel offers one of the plans
  for (const AttachPlan& plan : probe.Plans()) {
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), plan.mechanism) == allowed.end()) {
      // Asked anyway (a cheap check, nothing is loaded) so that a probe left off by choice is
      // told apart from one the kernel cannot serve.
      bool supported = probe.Supported(plan).ok();
      any_supported |= supported;
      if (supported) {
        excluded_supported.push_back(PlanName(plan));
        excluded_cheap |= !plan.costly;
      }
      skipped.push_back(fmt::format("{}: not in the configured mechanisms{}", PlanName(plan),
                                    supported ? " (supported here)" : ""));
      continue;
    }
    absl::Status supported = probe.Supported(plan);
    if (!supported.ok()) {
      skipped.push_back(fmt::format("{}: {}", PlanName(plan), std::string(supported.message())));
      continue;
    }
    any_supported = true;
    absl::Status attached = probe.Attach(plan);
    if (!attached.ok()) {
      skipped.push_back(fmt::format("{}: {}", PlanName(plan), std::string(attached.message())));
      continue;
    }
    std::string detail = PlanName(plan);
    if (skipped.empty()) {
      spdlog::info("probe {}: attached with {}", probe.ProbeName(), detail);
    } else {
      spdlog::info("probe {}: attached with {} (skipped {})", probe.ProbeName(), detail,
                   fmt::format("{}", fmt::join(skipped, "; ")));
    }
    return ProbeState{std::string(probe.ProbeName()), plan.mechanism, detail};
  }
  std::string why =
      skipped.empty() ? "no mechanism to try" : fmt::format("{}", fmt::join(skipped, "; "));
  ProbeState state{std::string(probe.ProbeName()), Mechanism::kNone, why};
  state.supported = any_supported;
  // Off by configuration only when what was left out is what the defaults leave out for its
  // cost; a restriction to mechanisms this kernel cannot serve is a failure, reported as such.
  if (!excluded_supported.empty() && !excluded_cheap) {
    state.excluded_by_config = true;
    spdlog::info(
        "probe {}: off by configuration: this kernel supports {}, which probes.{}.mechanisms "
        "leaves out; add it there to turn the probe on ({})",
        probe.ProbeName(), fmt::join(excluded_supported, ", "), probe.ProbeName(), why);
    return state;
  }
  if (!any_supported) {
    // Nothing to fix in kpathd: this kernel has none of the probe's mechanisms.
    spdlog::warn(
        "probe {}: this kernel offers none of its mechanisms; its pathology is not "
        "watched on this host: {}",
        probe.ProbeName(), why);
    return state;
  }
  spdlog::warn("probe {}: not attached, its metrics are absent: {}", probe.ProbeName(), why);
  return state;
}

absl::Status StartProbe(AttachableProbe& probe, const std::vector<Mechanism>& allowed,
                        ProbeState& state) {
  state = AttachFirstSupported(probe, allowed);
  if (state.mechanism == Mechanism::kNone && !state.excluded_by_config) {
    return absl::UnavailableError(fmt::format("not attached: {}", state.detail));
  }
  return absl::OkStatus();
}

namespace {
int LibbpfPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  // The whole message: a verifier log is one message of many kilobytes, and its last lines say
  // why a program was refused (a fixed 1 KiB buffer cut 4.19's logs before the reason).
  va_list again;
  va_copy(again, args);
  int n = std::vsnprintf(nullptr, 0, fmt, args);
  std::string buf(n > 0 ? static_cast<size_t>(n) + 1 : 1, '\0');
  if (n > 0) std::vsnprintf(buf.data(), buf.size(), fmt, again);
  va_end(again);
  if (n <= 0) return n;
  std::string_view msg(buf.data(), static_cast<size_t>(n));
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  if (level == LIBBPF_DEBUG) {
    spdlog::trace("libbpf: {}", msg);
  } else {
    spdlog::debug("libbpf: {}", msg);
  }
  return n;
}
}  // namespace

void RouteLibbpfLogsToSpdlog() { libbpf_set_print(LibbpfPrint); }

}  // namespace kpath
