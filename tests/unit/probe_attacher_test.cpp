// Mechanism selection against a fake kernel: every fallback path without needing the kernel
// that has (or lacks) each feature.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "fake_kernel_features.h"
#include "probes/collect/bpf_probe.h"
#include "probes/collect/probe_attacher.h"

using namespace kpath;

namespace {

// A kernel with BTF, without tracefs and (unless a test says) without kprobes.
FakeKernelFeatures Kernel() {
  FakeKernelFeatures k;
  k.possible_cpus = 4;
  return k;
}

// A probe whose plans are checked against the fake kernel and whose attach can be made to fail.
class FakeProbe final : public AttachableProbe {
 public:
  explicit FakeProbe(KernelFeatures& kernel) : kernel_(kernel) {}
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
  absl::Status Supported(const AttachPlan& plan) override {
    switch (plan.mechanism) {
      case Mechanism::kTpBtf:
        return kernel_.HasVmlinuxBtf() ? absl::OkStatus() : absl::UnavailableError("no BTF");
      case Mechanism::kTracepoint:
        return kernel_.Tracepoint("cat", "event").status();
      case Mechanism::kKprobe:
        return kernel_.KprobesAvailable();
      default:
        return absl::OkStatus();
    }
  }
  absl::Status Attach(const AttachPlan& plan) override {
    attempted.push_back(plan.mechanism);
    if (attach_fails.count(plan.mechanism)) return absl::PermissionDeniedError("load: EPERM");
    if (attach_blind.count(plan.mechanism)) return BlindHookError("the check call did not arrive");
    return absl::OkStatus();
  }
  void Detach() override { ++detached; }

 private:
  KernelFeatures& kernel_;
};

// A BpfProbe whose Attach only counts: the base's Start, Probes and Stop around it.
class FakeBpfProbe final : public BpfProbe {
 public:
  FakeBpfProbe(KernelFeatures& kernel, std::vector<Mechanism> allowed)
      : BpfProbe("fake_bpf", kernel, std::move(allowed)) {}
  ~FakeBpfProbe() override { Detach(); }
  int attached = 0;
  int detached = 0;

  std::vector<AttachPlan> Plans() const override {
    return {{Mechanism::kTpBtf, "cat:event"}, {Mechanism::kRawTp, "cat:event"}};
  }
  absl::Status Supported(const AttachPlan& plan) override {
    if (plan.mechanism == Mechanism::kTpBtf && !kernel_.HasVmlinuxBtf()) {
      return absl::UnavailableError("no BTF");
    }
    return absl::OkStatus();
  }
  absl::Status Attach(const AttachPlan&) override {
    ++attached;
    return absl::OkStatus();
  }
  absl::Status Collect(MetricFamilies&) override { return absl::OkStatus(); }
  void Detach() override {
    BpfProbe::Detach();
    ++detached;
  }

 private:
  std::string OnAttached() override { return "keyed by something"; }
};

}  // namespace

TEST_CASE("the first supported mechanism is attached and reported", "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  FakeProbe probe(kernel);
  ProbeState state = AttachFirstSupported(probe, {});
  CHECK(state.mechanism == Mechanism::kTpBtf);
  CHECK(state.probe == "fake");
  CHECK(state.detail == "tp_btf cat:event");
  CHECK(probe.attempted == std::vector<Mechanism>{Mechanism::kTpBtf});
}

TEST_CASE("without BTF the probe falls back to raw_tp without trying tp_btf", "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  kernel.btf = false;
  FakeProbe probe(kernel);
  ProbeState state = AttachFirstSupported(probe, {});
  CHECK(state.mechanism == Mechanism::kRawTp);
  CHECK(probe.attempted == std::vector<Mechanism>{Mechanism::kRawTp});
}

TEST_CASE("a mechanism whose load fails falls through to the next one", "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  FakeProbe probe(kernel);
  probe.attach_fails = {Mechanism::kTpBtf, Mechanism::kRawTp};
  kernel.kprobes = true;
  ProbeState state = AttachFirstSupported(probe, {});
  // tracepoint is unsupported (no tracefs), so kprobe is next.
  CHECK(state.mechanism == Mechanism::kKprobe);
  CHECK(probe.attempted ==
        std::vector<Mechanism>{Mechanism::kTpBtf, Mechanism::kRawTp, Mechanism::kKprobe});
}

TEST_CASE("the configured mechanisms restrict the choice, in the probe's order", "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  kernel.kprobes = true;
  FakeProbe probe(kernel);
  ProbeState state = AttachFirstSupported(probe, {Mechanism::kKprobe, Mechanism::kRawTp});
  CHECK(state.mechanism == Mechanism::kRawTp);
  CHECK(probe.attempted == std::vector<Mechanism>{Mechanism::kRawTp});
}

TEST_CASE("when nothing attaches the state is none with every reason", "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  kernel.btf = false;
  FakeProbe probe(kernel);
  probe.attach_fails = {Mechanism::kRawTp};
  ProbeState state = AttachFirstSupported(probe, {});
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK_THAT(state.detail, Catch::Contains("tp_btf cat:event: no BTF"));
  CHECK_THAT(state.detail, Catch::Contains("raw_tp cat:event: load: EPERM"));
  CHECK_THAT(state.detail, Catch::Contains("tracepoint cat:event: no tracefs"));
  CHECK_THAT(state.detail, Catch::Contains("kprobe some_function: no kprobes"));
}

TEST_CASE("supported: the kernel offers one of the probe's mechanisms, attached or not",
          "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  kernel.btf = false;  // no BTF, no tracefs, no kprobes: a 4.19-like kernel for this probe
  FakeProbe probe(kernel);
  probe.plans = {{Mechanism::kTpBtf, "cat:event"},
                 {Mechanism::kTracepoint, "cat:event"},
                 {Mechanism::kKprobe, "some_function"}};
  ProbeState state;
  // Nothing attached and nothing to attach with: not supported, and still a failed Start (the
  // collector has nothing to read).
  CHECK_FALSE(StartProbe(probe, {}, state).ok());
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK_FALSE(state.supported);
  CHECK(probe.attempted.empty());
  // Allowed or not by the configuration, what the kernel lacks stays unsupported.
  CHECK_FALSE(AttachFirstSupported(probe, {Mechanism::kKprobe}).supported);

  // Supported but failing to load: supported, so ProbeDetached is right to fire.
  kernel.kprobes = true;
  probe.attach_fails = {Mechanism::kKprobe};
  state = AttachFirstSupported(probe, {});
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK(state.supported);
  // Supported but left out by the configuration: supported too.
  probe.attach_fails.clear();
  CHECK(AttachFirstSupported(probe, {Mechanism::kTpBtf}).supported);
  CHECK(AttachFirstSupported(probe, {}).supported);
}

TEST_CASE("a restriction to mechanisms the probe lacks attaches nothing", "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  FakeProbe probe(kernel);
  ProbeState state = AttachFirstSupported(probe, {Mechanism::kFentry});
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK(probe.attempted.empty());
  CHECK_THAT(state.detail, Catch::Contains("not in the configured mechanisms"));
  // The kernel supports tp_btf and raw_tp, which the restriction left out: a failure (the
  // operator asked for what this kernel lacks), said so, not "off by configuration".
  CHECK_FALSE(state.excluded_by_config);
  CHECK_THAT(
      state.detail,
      Catch::Contains("tp_btf cat:event: not in the configured mechanisms (supported here)"));
  CHECK_FALSE(StartProbe(probe, {Mechanism::kFentry}, state).ok());
}

TEST_CASE("leaving out only a costly mechanism the kernel has is off by configuration",
          "[attach]") {
  FakeKernelFeatures kernel = Kernel();  // no kprobes: the cheap plan cannot serve
  FakeProbe probe(kernel);
  probe.plans = {{Mechanism::kKprobe, "some_function"},
                 {Mechanism::kRawTp, "raw_syscalls:sys_enter", /*costly=*/true}};
  ProbeState state;
  CHECK(StartProbe(probe, {Mechanism::kKprobe}, state).ok());
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK(state.excluded_by_config);
  CHECK(probe.attempted.empty());
  CHECK_THAT(state.detail, Catch::Contains("raw_tp raw_syscalls:sys_enter: not in the configured "
                                           "mechanisms (supported here)"));
  // Asked for, the costly plan attaches.
  CHECK(StartProbe(probe, {Mechanism::kKprobe, Mechanism::kRawTp}, state).ok());
  CHECK(state.mechanism == Mechanism::kRawTp);
  CHECK_FALSE(state.excluded_by_config);
}

TEST_CASE("a restriction that leaves out only what the kernel lacks is a failure", "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  kernel.btf = false;
  FakeProbe probe(kernel);
  probe.attach_fails = {Mechanism::kRawTp};
  // tp_btf (no BTF) and tracepoint (no tracefs) are left out, and the kernel could not serve
  // them anyway; raw_tp, allowed, fails to load.
  ProbeState state;
  absl::Status started = StartProbe(probe, {Mechanism::kRawTp}, state);
  CHECK_FALSE(started.ok());
  CHECK(state.mechanism == Mechanism::kNone);
  CHECK_FALSE(state.excluded_by_config);
  CHECK_THAT(state.detail, Catch::Contains("tp_btf cat:event: not in the configured mechanisms"));
}

TEST_CASE("a plan found blind after attaching falls through, and is told from a load failure",
          "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  FakeProbe probe(kernel);
  probe.attach_blind = {Mechanism::kTpBtf};
  ProbeState state = AttachFirstSupported(probe, {});
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

TEST_CASE("a BpfProbe reports the plan it attached with its own words, and detaches on Stop",
          "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  kernel.btf = false;
  FakeBpfProbe probe(kernel, {});
  CHECK(probe.Name() == "fake_bpf");
  CHECK(probe.ProbeName() == "fake_bpf");
  REQUIRE(probe.Probes().size() == 1);
  CHECK(probe.Probes()[0].detail == "not started");
  REQUIRE(probe.Start().ok());
  REQUIRE(probe.Probes().size() == 1);
  const ProbeState state = probe.Probes()[0];
  CHECK(state.probe == "fake_bpf");
  CHECK(state.mechanism == Mechanism::kRawTp);
  CHECK(state.detail == "raw_tp cat:event; keyed by something");
  CHECK(probe.attached == 1);
  CHECK(probe.Programs().empty());
  CHECK(probe.StatusFragment().empty());
  const int before = probe.detached;
  probe.Stop();
  CHECK(probe.detached == before + 1);
}

TEST_CASE("a BpfProbe that attaches nothing fails Start without its own words", "[attach]") {
  FakeKernelFeatures kernel = Kernel();
  FakeBpfProbe probe(kernel, {Mechanism::kFentry});
  absl::Status started = probe.Start();
  CHECK(absl::IsUnavailable(started));
  CHECK(probe.attached == 0);
  REQUIRE(probe.Probes().size() == 1);
  CHECK(probe.Probes()[0].mechanism == Mechanism::kNone);
  CHECK_THAT(probe.Probes()[0].detail, !Catch::Contains("keyed by"));
}
