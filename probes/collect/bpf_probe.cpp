#include "probes/collect/bpf_probe.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <optional>

#include "fmt/format.h"
#include "probes/collect/bpf_maps.h"

namespace kpath {

BpfProbe::BpfProbe(std::string_view name, KernelFeatures& kernel, std::vector<Mechanism> allowed)
    : kernel_(kernel),
      allowed_(std::move(allowed)),
      state_{std::string(name), Mechanism::kNone, "not started"},
      name_(name) {}

absl::Status BpfProbe::Start() {
  if (absl::Status s = StartProbe(*this, allowed_, state_); !s.ok()) return s;
  if (std::string more = OnAttached(); !more.empty()) {
    state_.detail = fmt::format("{}; {}", state_.detail, more);
  }
  return absl::OkStatus();
}

void BpfProbe::Detach() {
  links_.clear();
  programs_.clear();
}

absl::Status BpfProbe::AttachAndRemember(std::span<bpf_program* const> programs,
                                         const AttachPlan& plan, std::string_view step) {
  std::optional<std::string> symbol;
  if (plan.mechanism == Mechanism::kKprobe) {
    symbol = kernel_.KernelFunction(plan.target);
    if (!symbol) return absl::NotFoundError("function not in kallsyms");
  }
  const size_t kept = links_.size();
  for (bpf_program* prog : programs) {
    if (!prog) continue;
    bpf_link* link = AttachProgram(prog, symbol ? symbol->c_str() : nullptr);
    if (!link) {
      int err = errno;
      links_.resize(kept);
      return LibbpfError(
          step.empty() ? fmt::format("attach {}", bpf_program__name(prog)) : std::string(step),
          err);
    }
    Remember(link);
  }
  return absl::OkStatus();
}

absl::Status BpfProbe::CanaryCounted(int map_fd, uint32_t key, std::string_view canary,
                                     const std::function<absl::Status()>& cause) const {
  absl::StatusOr<uint64_t> before = SumPerCpu(map_fd, key, "read the canary counter");
  if (!before.ok()) return before.status();
  if (absl::Status s = cause(); !s.ok()) return s;
  absl::StatusOr<uint64_t> after = SumPerCpu(map_fd, key, "read the canary counter");
  if (!after.ok()) return after.status();
  return *after > *before ? absl::OkStatus() : CanaryNotSeen(canary);
}

absl::Status BpfProbe::CanaryNotSeen(std::string_view canary) const {
  return absl::NotFoundError(fmt::format("{} did not reach the {} programs ({})", canary,
                                         MechanismName(state_.mechanism), state_.detail));
}

void BpfProbe::ListPrograms(std::initializer_list<bpf_program*> programs) {
  for (bpf_program* prog : programs) {
    if (prog) programs_.push_back({state_.probe, bpf_program__name(prog), bpf_program__fd(prog)});
  }
}

}  // namespace kpath
