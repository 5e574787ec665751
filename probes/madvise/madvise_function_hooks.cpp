// The madvise probe's function hooks: a kprobe or fentry on a madvise function (a syscall wrapper
// or do_madvise), with process_madvise's wrapper as its companion. The two mechanisms take the
// same steps on different objects; KprobeHook and FentryHook say what differs.
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "madvise.legacy.skel.h"
#include "madvise.skel.h"
#include "madvise_fentry.skel.h"
#include "probes/collect/bpf_maps.h"
#include "probes/collect/bpf_skeleton.h"
#include "probes/madvise/madvise.h"
#include "probes/madvise/madvise_probe.h"

namespace kpath {

namespace {

uint32_t KprobeLayout(MadviseArgLayout layout) {
  switch (layout) {
    case MadviseArgLayout::kSyscallRegs:
      return MADVISE_KPROBE_SYSCALL_REGS;
    case MadviseArgLayout::kPlainArgs:
      return MADVISE_KPROBE_PLAIN_ARGS;
    case MadviseArgLayout::kMmFirst:
      return MADVISE_KPROBE_MM_FIRST;
  }
  return MADVISE_KPROBE_PLAIN_ARGS;
}

// A skeleton's generated functions (static inline in its .skel.h).
template <typename S, S* (*OpenFn)(), void (*DestroyFn)(S*), int (*LoadFn)(S*)>
struct SkeletonFunctions {
  using Skeleton = S;
  static OwnedSkeleton<S> Open(bool /*global_data: 5.2+ wherever fentry is*/) {
    return OwnedSkeleton<S>(OpenFn(), DestroyFn);
  }
  static constexpr auto Load = LoadFn;
};

// What sets the function hooks apart: the kprobe object (madvise.bpf.c, which loads without
// BTF) is told the argument layout in a constant and its target at attach; the fentry object
// has a program per layout, each given its target before load.
struct KprobeHook
    : SkeletonFunctions<madvise_bpf, madvise_bpf__open, madvise_bpf__destroy, madvise_bpf__load> {
  // madvise.bpf.c has a build for kernels without global data (4.19).
  static OwnedSkeleton<madvise_bpf> Open(bool global_data) {
    return KPATH_OPEN_SKELETON(madvise, global_data);
  }
  static absl::StatusOr<bpf_program*> Madvise(Skeleton* skel, MadviseArgLayout layout,
                                              const std::string&) {
    skel->rodata->kprobe_layout = KprobeLayout(layout);
    return skel->progs.madvise_kprobe;
  }
  static absl::StatusOr<bpf_program*> ProcessMadvise(Skeleton* skel, MadviseArgLayout layout,
                                                     const std::string&) {
    skel->rodata->pm_kprobe_layout = KprobeLayout(layout);
    return skel->progs.process_madvise_kprobe;
  }
};

struct FentryHook : SkeletonFunctions<madvise_fentry_bpf, madvise_fentry_bpf__open,
                                      madvise_fentry_bpf__destroy, madvise_fentry_bpf__load> {
  static absl::StatusOr<bpf_program*> Madvise(Skeleton* skel, MadviseArgLayout layout,
                                              const std::string& target) {
    bpf_program* chosen =
        layout == MadviseArgLayout::kSyscallRegs ? skel->progs.madvise_fentry_syscall
        : layout == MadviseArgLayout::kPlainArgs ? skel->progs.madvise_fentry_do_madvise
                                                 : skel->progs.madvise_fentry_do_madvise_mm;
    if (int err = bpf_program__set_attach_target(chosen, 0, target.c_str()); err) {
      return LibbpfError("set fentry target", err);
    }
    return chosen;
  }
  // The companion is always a syscall wrapper (CompanionFor): it reads a pt_regs pointer.
  static absl::StatusOr<bpf_program*> ProcessMadvise(Skeleton* skel, MadviseArgLayout,
                                                     const std::string& target) {
    bpf_program* pm = skel->progs.process_madvise_fentry_syscall;
    if (int err = bpf_program__set_attach_target(pm, 0, target.c_str()); err) {
      return LibbpfError("set process_madvise fentry target", err);
    }
    return pm;
  }
};

}  // namespace

template <typename Hook>
absl::Status MadviseProbe::AttachFunctionWith(const AttachPlan& plan,
                                              OwnedSkeleton<typename Hook::Skeleton>& keep) {
  absl::StatusOr<MadviseArgLayout> layout = FunctionLayout(plan.target);
  if (!layout.ok()) return layout.status();
  const bool kprobe = plan.mechanism == Mechanism::kKprobe;
  if (kprobe && !kernel_.KernelFunction(plan.target)) {
    return absl::NotFoundError("function not in kallsyms");
  }
  Companion companion = CompanionFor(plan);

  absl::Status last;
  for (bool with_companion : {companion.target.has_value(), false}) {
    OwnedSkeleton<typename Hook::Skeleton> skel = Hook::Open(kernel_.HasBpfGlobalData());
    if (!skel) return LibbpfError("open", errno);
    skel->rodata->madvise_self_tgid = static_cast<__u32>(getpid());
    skel->rodata->madvise_owner = pod_labels_.OwnerKind();
    absl::StatusOr<bpf_program*> chosen = Hook::Madvise(skel.get(), *layout, plan.target);
    if (!chosen.ok()) return chosen.status();
    bpf_program* pm = nullptr;
    if (with_companion) {
      // The companion's own layout: a wrapper takes a pt_regs pointer.
      absl::StatusOr<bpf_program*> hook = Hook::ProcessMadvise(
          skel.get(), FunctionLayout(*companion.target).value_or(MadviseArgLayout::kSyscallRegs),
          *companion.target);
      if (!hook.ok()) {
        last = hook.status();
        continue;
      }
      pm = *hook;
    }
    EnableOnly(skel->obj, {*chosen, pm});
    if (int err = Hook::Load(skel.get()); err) {
      last = LibbpfError(pm ? "load (with process_madvise)" : "load", err);
      if (pm) continue;
      return last;
    }
    if (absl::Status s = FillTunablesMap(skel->obj); !s.ok()) return s;
    if (absl::Status s = AdoptMaps(skel->obj); !s.ok()) return s;
    if (absl::Status s = AttachAndRemember({*chosen}, plan, "attach"); !s.ok()) return s;
    ListPrograms({*chosen});
    if (pm) {
      if (bpf_link* pm_link = AttachProgram(pm, kprobe ? companion.target->c_str() : nullptr)) {
        Remember(pm_link);
        ListPrograms({pm});
        process_madvise_ = fmt::format("{} {}", MechanismName(plan.mechanism), *companion.target);
      } else {
        process_madvise_ =
            fmt::format("not counted: attach {} {}: {}", MechanismName(plan.mechanism),
                        *companion.target, std::strerror(errno));
      }
    } else {
      process_madvise_ = fmt::format(
          "not counted: {}", companion.target ? std::string(last.message()) : companion.reason);
    }
    keep = std::move(skel);
    return absl::OkStatus();
  }
  return last;
}

absl::Status MadviseProbe::AttachFunction(const AttachPlan& plan) {
  if (plan.mechanism == Mechanism::kKprobe) return AttachFunctionWith<KprobeHook>(plan, tp_skel_);
  return AttachFunctionWith<FentryHook>(plan, fentry_skel_);
}

}  // namespace kpath
