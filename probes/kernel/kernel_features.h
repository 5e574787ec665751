// What the running kernel offers, asked once and cached. Probes never look at the kernel version:
// they ask this class (BTF types, tracefs events, kallsyms symbols, perf event sources). Tests
// replace it with a fake to drive every fallback path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probes/kernel/cpu_list.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/kallsyms.h"
#include "probes/kernel/kernel_layout.h"
#include "probes/kernel/tracefs.h"

struct btf;

namespace kpath {

class KernelFeatures {
 public:
  KernelFeatures();
  // A copy (of a fake, in tests) starts with an empty layout cache of its own.
  KernelFeatures(const KernelFeatures&);
  KernelFeatures& operator=(const KernelFeatures&);
  virtual ~KernelFeatures();

  // The struct offsets and tracepoint layouts kpathd relies on, computed once from the answers
  // below (kernel_layout.h).
  KernelLayout& Layout() { return *layout_; }

  // /sys/kernel/btf/vmlinux exists and libbpf can load it.
  virtual bool HasVmlinuxBtf() = 0;
  // Number of tracepoint arguments from BTF (the `btf_trace_<event>` typedef's function
  // prototype, minus its leading `void *__data`); nullopt without BTF or without that event.
  virtual std::optional<int> BtfTracepointArgs(std::string_view event) = 0;
  // A function of that exact name exists in vmlinux BTF (what fentry can attach to).
  virtual bool BtfHasFunction(std::string_view name) = 0;
  // Parameter names of a function's prototype in vmlinux BTF, in order; nullopt without BTF or
  // without that function. Tells argument layouts apart where a function's signature changed
  // (do_madvise gained a leading `mm` when process_madvise came). Not pure: fakes may omit it.
  virtual std::optional<std::vector<std::string>> BtfFunctionParams(std::string_view name) {
    (void)name;
    return std::nullopt;
  }
  // Byte offset of a member of a struct in vmlinux BTF (task_struct.comm); nullopt without BTF,
  // without that struct or member. Not pure: fakes may omit it.
  virtual std::optional<uint32_t> BtfMemberOffset(std::string_view struct_name,
                                                  std::string_view member) {
    (void)struct_name;
    (void)member;
    return std::nullopt;
  }
  // Offset of a per-CPU variable from the start of the per-CPU section (vmlinux BTF's
  // `.data..percpu`, which pahole fills since v1.18); nullopt without BTF or that variable. Not
  // pure: fakes may omit it.
  virtual std::optional<uint32_t> BtfPercpuVarOffset(std::string_view var) {
    (void)var;
    return std::nullopt;
  }
  // The tracefs root (mounting it at <sysfs>/kernel/tracing if absent and allowed).
  virtual absl::StatusOr<std::filesystem::path> Tracefs() = 0;
  // A classic tracepoint's format; NotFound when the kernel lacks it, another error when tracefs
  // cannot be reached.
  virtual absl::StatusOr<TracepointFormat> Tracepoint(std::string_view category,
                                                      std::string_view event) = 0;
  // The kernel has this tracepoint at all (for raw_tp): BTF typedef, kallsyms `__tracepoint_<e>`
  // or a tracefs event directory.
  virtual bool TracepointExists(std::string_view category, std::string_view event) = 0;
  // The symbol to kprobe/fentry for a function name (see KallsymsIndex::ResolveFunction).
  virtual std::optional<std::string> KernelFunction(std::string_view name) = 0;
  // Ok if kprobes can be created (a `kprobe` perf event source or tracefs kprobe_events);
  // otherwise the reason.
  virtual absl::Status KprobesAvailable() = 0;
  virtual int PossibleCpus() = 0;
  // The kallsyms index (refreshed by the caller when modules change); may be null if unreadable.
  virtual std::shared_ptr<const KallsymsIndex> Kallsyms() = 0;
  // The CPUs online now (not cached: CPUs come and go).
  virtual absl::StatusOr<std::vector<int>> OnlineCpus() = 0;
  // Ok when a hardware PMU delivers its overflow interrupt as an NMI, which IRQs off cannot
  // hold back (x86's `cpu` PMU; an arm64 PMU with GICv3 pseudo-NMIs on); else why not.
  virtual absl::Status HardwareNmiSampling() = 0;
  // Ok when the `software` perf event source (cpu-clock) exists.
  virtual absl::Status SoftwareCpuClock() = 0;
  // BPF ring buffer maps (BPF_MAP_TYPE_RINGBUF, Linux 5.8+); else the perf buffer is used.
  virtual bool HasRingBuffer() = 0;
  // BPF global data (.rodata, .data, .bss maps referenced from programs; Linux 5.2+): else each
  // probe loads its object's build without it (KPATH_TUNABLE in probes/bpf/kpath_bpf.h).
  virtual bool HasBpfGlobalData() = 0;
  // BPF atomic instructions with a result (fetch-and-add, compare-and-swap; Linux 5.12+), which
  // the percpu probe's allocation log and live table need.
  virtual bool HasBpfAtomics() = 0;
  // BPF can read KVM's per-CPU steal-time record as a typed ksym: vmlinux BTF describes the
  // per-CPU variable `steal_time` and kallsyms lists it (CONFIG_KALLSYMS_ALL), so the kernel
  // resolves it.
  virtual bool KvmStealTimeReadable() = 0;

 private:
  std::unique_ptr<KernelLayout> layout_;
};

// The real kernel, through HostPaths. Results are cached after the first question.
class LiveKernelFeatures final : public KernelFeatures {
 public:
  // `may_mount`: allowed to mount tracefs when it is not mounted (only for the real /sys).
  LiveKernelFeatures(HostPaths paths, bool may_mount);
  ~LiveKernelFeatures() override;

  bool HasVmlinuxBtf() override;
  std::optional<int> BtfTracepointArgs(std::string_view event) override;
  bool BtfHasFunction(std::string_view name) override;
  std::optional<std::vector<std::string>> BtfFunctionParams(std::string_view name) override;
  std::optional<uint32_t> BtfMemberOffset(std::string_view struct_name,
                                          std::string_view member) override;
  std::optional<uint32_t> BtfPercpuVarOffset(std::string_view var) override;
  absl::StatusOr<std::filesystem::path> Tracefs() override;
  absl::StatusOr<TracepointFormat> Tracepoint(std::string_view category,
                                              std::string_view event) override;
  bool TracepointExists(std::string_view category, std::string_view event) override;
  std::optional<std::string> KernelFunction(std::string_view name) override;
  absl::Status KprobesAvailable() override;
  int PossibleCpus() override;
  std::shared_ptr<const KallsymsIndex> Kallsyms() override;
  absl::StatusOr<std::vector<int>> OnlineCpus() override;
  absl::Status HardwareNmiSampling() override;
  absl::Status SoftwareCpuClock() override;
  bool HasRingBuffer() override;
  bool HasBpfGlobalData() override;
  bool HasBpfAtomics() override;
  bool KvmStealTimeReadable() override;
  // Frees the parsed vmlinux BTF (~6 MB resident), for when every probe is loaded; a later
  // question parses it again.
  void ReleaseBtf();

 private:
  // The *Locked helpers expect mu_ to be held.
  struct btf* VmlinuxBtf();  // loaded once, owned
  absl::StatusOr<std::filesystem::path> TracefsLocked();
  std::shared_ptr<const KallsymsIndex> KallsymsLocked();

  HostPaths paths_;
  bool may_mount_;
  std::mutex mu_;
  bool btf_tried_ = false;
  struct btf* btf_ = nullptr;
  std::optional<absl::StatusOr<std::filesystem::path>> tracefs_;
  std::shared_ptr<const KallsymsIndex> kallsyms_;
  bool kallsyms_tried_ = false;
  std::filesystem::path mounted_tracefs_;  // non-empty when this object mounted tracefs there
  std::map<std::string, absl::StatusOr<TracepointFormat>, std::less<>> formats_;  // "cat/event"
  std::optional<absl::Status> kprobes_;
  std::optional<int> possible_cpus_;
  std::optional<bool> global_data_;
  std::optional<bool> atomics_;
};

}  // namespace kpath
