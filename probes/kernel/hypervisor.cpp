#include "probes/kernel/hypervisor.h"

#include <array>
#include <utility>

#include "probes/kernel/text.h"

namespace kpath {
namespace {

// A short file's first line, trimmed; empty when unreadable. Device-tree strings end in NUL.
std::string FirstLineOf(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, 4096);
  if (!text.ok()) return {};
  std::string_view line = text::FirstLine(*text);
  line = line.substr(0, line.find('\0'));
  return std::string(text::Trim(line));
}

}  // namespace

std::optional<bool> CpuinfoHypervisorFlag(std::string_view cpuinfo) {
  std::optional<bool> flag;
  for (std::string_view line : text::Lines(cpuinfo)) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || text::Trim(line.substr(0, colon)) != "flags") continue;
    flag = false;
    for (std::string_view token : text::Tokens(line.substr(colon + 1))) {
      if (token == "hypervisor") return true;
    }
  }
  return flag;
}

std::optional<std::string> HypervisorFromDmi(std::string_view sys_vendor,
                                             std::string_view product_name, bool virtual_only) {
  // Vendors and products that only virtual machines report, then cloud vendors whose bare-metal
  // instances report the same vendor (told apart by CPUID on x86 only).
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kVirtualVendors = {
      {{"QEMU", "qemu"},
       {"Xen", "xen"},
       {"VMware, Inc.", "vmware"},
       {"innotek GmbH", "oracle"},
       {"Parallels Software International Inc.", "parallels"},
       {"Bochs", "bochs"},
       {"Red Hat", "kvm"},
       {"OpenStack Foundation", "kvm"}}};
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kVirtualProducts = {
      {{"KVM", "kvm"},
       {"Virtual Machine", "microsoft"},
       {"Google Compute Engine", "google"},
       {"Alibaba Cloud ECS", "alibaba"}}};
  for (const auto& [vendor, name] : kVirtualVendors) {
    if (sys_vendor.starts_with(vendor)) return std::string(name);
  }
  for (const auto& [product, name] : kVirtualProducts) {
    if (product_name.starts_with(product)) return std::string(name);
  }
  if (virtual_only) return std::nullopt;
  if (sys_vendor == "Amazon EC2") return std::string("amazon");
  if (sys_vendor == "Microsoft Corporation") return std::string("microsoft");
  if (sys_vendor == "Google") return std::string("google");
  return std::nullopt;
}

std::optional<Hypervisor> DetectHypervisor(const HostPaths& paths) {
  const std::string vendor = FirstLineOf(paths.Sys("class/dmi/id/sys_vendor"));
  const std::string product = FirstLineOf(paths.Sys("class/dmi/id/product_name"));
  const std::string xen_type = FirstLineOf(paths.Sys("hypervisor/type"));
  absl::StatusOr<std::string> cpuinfo = ReadFileToString(paths.Proc("cpuinfo"), 16 << 20);
  std::optional<bool> flag = cpuinfo.ok() ? CpuinfoHypervisorFlag(*cpuinfo) : std::nullopt;
  const std::string dmi_evidence = vendor.empty() ? "" : ", DMI " + vendor;

  if (flag.has_value()) {  // x86: CPUID decides
    if (!*flag) return std::nullopt;
    std::optional<std::string> name = HypervisorFromDmi(vendor, product, false);
    if (!name && !xen_type.empty()) name = xen_type;
    return Hypervisor{name.value_or("unknown"), "cpuinfo flag hypervisor" + dmi_evidence};
  }
  if (!xen_type.empty()) return Hypervisor{xen_type, "/sys/hypervisor/type " + xen_type};
  std::string dt_hypervisor = FirstLineOf(paths.Proc("device-tree/hypervisor/compatible"));
  if (!dt_hypervisor.empty()) {
    return Hypervisor{dt_hypervisor.substr(0, dt_hypervisor.find(',')),
                      "device tree /hypervisor " + dt_hypervisor};
  }
  if (FirstLineOf(paths.Proc("device-tree/compatible")) == "linux,dummy-virt") {
    return Hypervisor{"qemu", "device tree linux,dummy-virt (QEMU's virt board)"};
  }
  if (std::optional<std::string> name = HypervisorFromDmi(vendor, product, true)) {
    return Hypervisor{*name, "DMI " + vendor + " " + product};
  }
  return std::nullopt;
}

}  // namespace kpath
