// What every BPF probe shares: what it attached (its state, links and programs) and the methods
// that only report it, Start and Stop around the mechanism choice (StartProbe), and attaching a
// program for a plan. A probe derives from it and keeps its plans, whether the kernel supports
// each, how it loads and attaches one, and how it reads its maps into metrics.
#pragma once

#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "probes/collect/bpf_handles.h"
#include "probes/collect/collector.h"
#include "probes/collect/probe_attacher.h"
#include "probes/kernel/kernel_features.h"

struct bpf_program;

namespace kpath {

class BpfProbe : public Collector, public AttachableProbe {
 public:
  // Collector
  std::string_view Name() const override { return name_; }
  // Attaches the first supported plan (StartProbe) and adds OnAttached's words to the detail.
  absl::Status Start() override;
  void Stop() override { Detach(); }
  std::vector<ProbeState> Probes() const override { return {state_}; }
  std::vector<OwnBpfProgram> Programs() const override { return programs_; }
  std::string StatusFragment() const override { return status_; }

  // AttachableProbe
  std::string_view ProbeName() const override { return name_; }
  // Drops the links and the program list. A probe that holds more (its skeleton, map fds)
  // overrides it, calls this first, and calls Detach from its own destructor.
  void Detach() override;

 protected:
  // `name` outlives the probe (the probe's kName).
  BpfProbe(std::string_view name, KernelFeatures& kernel, std::vector<Mechanism> allowed);

  // Called by Start once a plan attached (or the configuration left the probe off): logs what
  // the probe chose beyond the mechanism, and returns words for the state's detail ("keyed by
  // ...") or nothing.
  virtual std::string OnAttached() { return {}; }

  // Attaches `programs` (null ones skipped) for `plan`, in order, and keeps their links until
  // Detach: a kprobe plan at the kernel's symbol for plan.target, any other plan the way each
  // program's section says. On an error, which names `step` ("attach <program>" when empty), the
  // links this call made are dropped.
  absl::Status AttachAndRemember(std::span<bpf_program* const> programs, const AttachPlan& plan,
                                 std::string_view step = {});
  absl::Status AttachAndRemember(std::initializer_list<bpf_program*> programs,
                                 const AttachPlan& plan, std::string_view step = {}) {
    return AttachAndRemember(std::span<bpf_program* const>(programs.begin(), programs.size()), plan,
                             step);
  }
  // A self-test of a counter the programs keep for kpathd's own events: runs `cause` (kpathd
  // makes one event the probe watches) and checks that the per-CPU counter `key` of `map_fd`
  // rose across it. Ok when it did; cause's error when the event could not be made; else a
  // NotFound naming `canary` and what is attached.
  absl::Status CanaryCounted(int map_fd, uint32_t key, std::string_view canary,
                             const std::function<absl::Status()>& cause) const;
  // The NotFound of a canary that did not arrive: names it and what is attached.
  absl::Status CanaryNotSeen(std::string_view canary) const;

  // Keeps `link` until Detach.
  void Remember(bpf_link* link) { links_.emplace_back(link); }
  // Lists `programs` (null ones skipped) in Programs(), after those listed before.
  void ListPrograms(std::initializer_list<bpf_program*> programs);

  KernelFeatures& kernel_;
  std::vector<Mechanism> allowed_;  // empty: all, in the probe's order
  ProbeState state_;
  std::vector<OwnedLink> links_;
  std::vector<OwnBpfProgram> programs_;
  std::string status_;  // the STATUS= fragment

 private:
  // Integration tests drop a probe's links and keep its maps, as another tool detaching
  // kpathd's programs would, to see its self-test fail.
  friend struct BpfProbeLinksForTest;

  std::string_view name_;
};

}  // namespace kpath
