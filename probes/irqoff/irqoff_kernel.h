// What the IRQ-off detector asks the kernel beyond KernelFeatures: which perf event sources
// exist, whether BPF has a ring buffer, whether the KVM steal clock is readable from BPF, and
// which CPUs are online. Asked of the running kernel, never inferred from its version; tests
// replace it with a fake to drive every mechanism.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probes/kernel/host_paths.h"

namespace kpath {

class IrqOffKernel {
 public:
  virtual ~IrqOffKernel() = default;
  // Ok when a hardware PMU delivers its overflow interrupt as an NMI, which IRQs off cannot
  // hold back (x86's `cpu` PMU; an arm64 PMU with GICv3 pseudo-NMIs on); else why not.
  virtual absl::Status HardwareNmiSampling() = 0;
  // Ok when the `software` perf event source (cpu-clock) exists.
  virtual absl::Status SoftwareCpuClock() = 0;
  // BPF ring buffer maps (BPF_MAP_TYPE_RINGBUF, Linux 5.8+); else the perf buffer is used.
  virtual bool HasRingBuffer() = 0;
  // BPF can read KVM's per-CPU steal-time record: vmlinux BTF describes the per-CPU variable
  // `steal_time` and kallsyms lists it (CONFIG_KALLSYMS_ALL), so the kernel resolves it.
  virtual bool KvmStealTimeReadable() = 0;
  // The CPUs online now.
  virtual absl::StatusOr<std::vector<int>> OnlineCpus() = 0;
};

class LiveIrqOffKernel final : public IrqOffKernel {
 public:
  explicit LiveIrqOffKernel(HostPaths paths) : paths_(std::move(paths)) {}
  absl::Status HardwareNmiSampling() override;
  absl::Status SoftwareCpuClock() override;
  bool HasRingBuffer() override;
  bool KvmStealTimeReadable() override;
  absl::StatusOr<std::vector<int>> OnlineCpus() override;

 private:
  HostPaths paths_;
};

}  // namespace kpath
