// Whether kpathd runs on a virtual machine, asked of what the kernel reports of the CPU and the
// firmware (as systemd-detect-virt does), never of a kernel version. The IRQ-off detector
// treats late timer ticks of a VM's every CPU together as a pause of the VM
// (probes/irqoff/README.md#on-virtual-machines); bare metal has no such pauses.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "probes/kernel/host_paths.h"

namespace kpath {

struct Hypervisor {
  std::string name;      // "kvm", "qemu", "xen", "amazon", ...; "unknown" when only a flag says so
  std::string evidence;  // what said so, for the log: "cpuinfo flag hypervisor, DMI QEMU"
};

// x86: the CPUID hypervisor bit, which every hypervisor sets (/proc/cpuinfo's `hypervisor`
// flag), decides; DMI and /sys/hypervisor only name it (bare-metal cloud instances keep their
// cloud's DMI vendor). Other architectures have no such bit: /sys/hypervisor/type (Xen), the
// device tree's /hypervisor node, QEMU's virt board, or a DMI vendor or product that only virtual
// machines report. nullopt: bare metal, or nothing says otherwise.
std::optional<Hypervisor> DetectHypervisor(const HostPaths& paths);

// The parts, for tests. `cpuinfo`'s x86 `flags` lines: nullopt without any (not x86), else
// whether they list `hypervisor`.
std::optional<bool> CpuinfoHypervisorFlag(std::string_view cpuinfo);
// A hypervisor that DMI's sys_vendor and product_name name, or nullopt. `virtual_only`: only
// vendors and products that exist solely as virtual machines (not "Amazon EC2", whose metal
// instances say the same).
std::optional<std::string> HypervisorFromDmi(std::string_view sys_vendor,
                                             std::string_view product_name, bool virtual_only);

}  // namespace kpath
