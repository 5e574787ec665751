// Mechanism selection against a fake kernel: every fallback path without needing the kernel
// that has (or lacks) each feature.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "probes/collect/probe_attacher.h"

using namespace kpath;

namespace {

// A kernel where each capability is a switch.
class FakeKernel final : public KernelFeatures {
 public:
  bool btf = true;
  bool kprobes = false;
  std::set<std::string, std::less<>> functions;

  bool HasVmlinuxBtf() override { return btf; }
  std::optional<int> BtfTracepointArgs(std::string_view) override {
    return btf ? std::optional<int>(10) : std::nullopt;
  }
  bool BtfHasFunction(std::string_view name) override { return btf && functions.count(name) > 0; }
  absl::StatusOr<std::filesystem::path> Tracefs() override {
    return absl::UnavailableError("no tracefs");
  }
  absl::StatusOr<TracepointFormat> Tracepoint(std::string_view, std::string_view) override {
    return absl::NotFoundError("no tracefs");
  }
  bool TracepointExists(std::string_view, std::string_view) override { return true; }
  std::optional<std::string> KernelFunction(std::string_view name) override {
    if (functions.count(name)) return std::string(name);
    return std::nullopt;
  }
  absl::Status KprobesAvailable() override {
    return kprobes ? absl::OkStatus() : absl::FailedPreconditionError("no kprobes");
  }
  int PossibleCpus() override { return 4; }
  std::shared_ptr<const KallsymsIndex> Kallsyms() override { return nullptr; }
};

// A probe whose plans are checked against the fake kernel and whose attach can be made to fail.
class FakeProbe final : public AttachableProbe {
 public:
  std::set<Mechanism> attach_fails;
  std::set<Mechanism> attach_blind;  // attaches, then its check event does not arrive
  std::vector<Mechanism> attempted;
  int detached = 0;

  std::string_view ProbeName() const override { return "fake"; }
  std::vector<AttachPlan> plans = {{Mechanism::kTpBtf, "cat:event"},
                                   {Mechanism::kRawTp, "cat:event"},
                                   {Mechanism::kTracepoint, "cat:event"},
                                   {Mechanism::kKprobe, "some_function"}};
  std::vector<AttachPlan> Plans() const override { return plans; }
  absl::Status Supported(const AttachPlan& plan, KernelFeatures& kernel) override {
    switch (plan.mechanism) {
      case Mechanism::kTpBtf:
        return kernel.HasVmlinuxBtf() ? absl::OkStatus() : absl::UnavailableError("no BTF");
      case Mechanism::kTracepoint:
        return kernel.Tracepoint("cat", "event").status();
      case Mechanism::kKprobe:
        return kernel.KprobesAvailable();
      default:
        return absl::OkStatus();
    }
  }
  absl::Status Attach(const AttachPlan& plan, KernelFeatures&) override {
    attempted.push_back(plan.mechanism);
    if (attach_fails.count(plan.mechanism)) return absl::PermissionDeniedError("load: EPERM");
    if (attach_blind.count(plan.mechanism)) return BlindHookError("the check call did not arrive");
    return absl::OkStatus();
  }
  void Detach() override { ++detached; }
};

}  // namespace

TEST_CASE("the first supported mechanism is attached and reported", "[attach]") {
  FakeKernel kernel;
  FakeProbe probe;
  ProbeState state = AttachFirstSupported(probe, kernel, {});
  CHECK(state.mechanism == Mechanism::kTpBtf);
  CHECK(state.probe == "fake");
  CHECK(state.detail == "tp_btf cat:event");
  CHECK(probe.attempted == std::vector<Mechanism>{Mechanism::kTpBtf});
}

TEST_CASE("without BTF the probe falls back to raw_tp without trying tp_btf", "[attach]") {
  FakeKernel kernel;
  kernel.btf = false;
  FakeProbe probe;
  ProbeState state = AttachFirstSupported(probe, kernel, {});
  CHECK(state.mechanism == Mechanism::kRawTp);
  CHECK(probe.attempted == std::vector<Mechanism>{Mechanism::kRawTp});
}

TEST_CASE("a mechanism whose load fails falls through to the next one", "[attach]") {
  FakeKernel kernel;
  FakeProbe probe;
  probe.attach_fails = {Mechanism::kTpBtf, Mechanism::kRawTp};
  kernel.kprobes = true;
  ProbeState state = AttachFirstSupported(probe, kernel, {});
  // tracepoint is unsupported (no tracefs), so kprobe is next.
  CHECK(state.mechanism == Mechanism::kKprobe);
  CHECK(probe.attempted ==
        std::vector<Mechanism>{Mechanism::kTpBtf, Mechanism::kRawTp, Mechanism::kKprobe});
}

TEST_CASE("the configured mechanisms restrict the choice, in the probe's order", "[attach]") {
  FakeKernel kernel;
  kernel.kprobes = true;
  FakeProbe probe;
  ProbeState state = AttachFirstSupported(probe, kernel, {Mechanism::kKprobe, Mechanism::kRawTp});
  CHECK(state.mechanism == Mechanism::kRawTp);
  CHECK(probe.attempted == std::vector<Mechanism>{Mechanism::kRawTp});
}

TEST_CASE("when nothing attaches the state is none with every reason", "[attach]") {
  FakeKernel kernel;
  kernel.btf = false;
  FakeProbe probe;
  probe.attach_fails = {Mechanism::kRawTp};
  ProbeState state = AttachFirstSupported(probe, kernel, {});
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK_THAT(state.detail, Catch::Contains("tp_btf cat:event: no BTF"));
  CHECK_THAT(state.detail, Catch::Contains("raw_tp cat:event: load: EPERM"));
  CHECK_THAT(state.detail, Catch::Contains("tracepoint cat:event: no tracefs"));
  CHECK_THAT(state.detail, Catch::Contains("kprobe some_function: no kprobes"));
}

TEST_CASE("a restriction to mechanisms the probe lacks attaches nothing", "[attach]") {
  FakeKernel kernel;
  FakeProbe probe;
  ProbeState state = AttachFirstSupported(probe, kernel, {Mechanism::kFentry});
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK(probe.attempted.empty());
  CHECK_THAT(state.detail, Catch::Contains("not in the configured mechanisms"));
  // The kernel supports tp_btf and raw_tp, which the restriction left out: a failure (the
  // operator asked for what this kernel lacks), said so, not "off by configuration".
  CHECK_FALSE(state.excluded_by_config);
  CHECK_THAT(
      state.detail,
      Catch::Contains("tp_btf cat:event: not in the configured mechanisms (supported here)"));
  CHECK_FALSE(StartProbe(probe, kernel, {Mechanism::kFentry}, state).ok());
}

TEST_CASE("leaving out only a costly mechanism the kernel has is off by configuration",
          "[attach]") {
  FakeKernel kernel;  // no kprobes: the cheap plan cannot serve
  FakeProbe probe;
  probe.plans = {{Mechanism::kKprobe, "some_function"},
                 {Mechanism::kRawTp, "raw_syscalls:sys_enter", /*costly=*/true}};
  ProbeState state;
  CHECK(StartProbe(probe, kernel, {Mechanism::kKprobe}, state).ok());
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK(state.excluded_by_config);
  CHECK(probe.attempted.empty());
  CHECK_THAT(state.detail, Catch::Contains("raw_tp raw_syscalls:sys_enter: not in the configured "
                                           "mechanisms (supported here)"));
  // Asked for, the costly plan attaches.
  CHECK(StartProbe(probe, kernel, {Mechanism::kKprobe, Mechanism::kRawTp}, state).ok());
  CHECK(state.mechanism == Mechanism::kRawTp);
  CHECK_FALSE(state.excluded_by_config);
}

TEST_CASE("a restriction that leaves out only what the kernel lacks is a failure", "[attach]") {
  FakeKernel kernel;
  kernel.btf = false;
  FakeProbe probe;
  probe.attach_fails = {Mechanism::kRawTp};
  // tp_btf (no BTF) and tracepoint (no tracefs) are left out, and the kernel could not serve
  // them anyway; raw_tp, allowed, fails to load.
  ProbeState state;
  absl::Status started = StartProbe(probe, kernel, {Mechanism::kRawTp}, state);
  CHECK_FALSE(started.ok());
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK_FALSE(state.excluded_by_config);
  CHECK_THAT(state.detail, Catch::Contains("tp_btf cat:event: not in the configured mechanisms"));
}

TEST_CASE("a plan found blind after attaching falls through, and is told from a load failure",
          "[attach]") {
  FakeKernel kernel;
  FakeProbe probe;
  probe.attach_blind = {Mechanism::kTpBtf};
  ProbeState state = AttachFirstSupported(probe, kernel, {});
  CHECK(state.mechanism == Mechanism::kRawTp);
  CHECK(probe.attempted == std::vector<Mechanism>{Mechanism::kTpBtf, Mechanism::kRawTp});

  absl::Status blind = BlindHookError("why");
  CHECK(IsBlindHook(blind));
  CHECK_FALSE(blind.ok());
  // A libbpf error with the same code is not one: the mark is a payload.
  CHECK_FALSE(IsBlindHook(absl::FailedPreconditionError("attached, but blind: a lookalike")));
  CHECK_FALSE(IsBlindHook(absl::OkStatus()));
}

TEST_CASE("mechanism names round-trip and none is not configurable", "[attach]") {
  for (std::string_view name : MechanismNames()) {
    auto m = ParseMechanism(name);
    REQUIRE(m);
    CHECK(MechanismName(*m) == name);
  }
  CHECK_FALSE(ParseMechanism("none"));
  CHECK_FALSE(ParseMechanism("kprobes"));
}
