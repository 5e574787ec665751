// Virtual machine or bare metal (probes/kernel/hypervisor.h): the IRQ-off detector's VM-pause
// rule applies only on a VM.
#include "probes/kernel/hypervisor.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "fixture_text.h"

using namespace kpath;
namespace fs = std::filesystem;

namespace {

const fs::path kLinux618 = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

// A scratch /proc and /sys tree with the given files.
class Tree {
 public:
  Tree() : root_(fs::temp_directory_path() / ("kpath-hv-" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "proc");
    fs::create_directories(root_ / "sys");
  }
  ~Tree() { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::path path = root_ / rel;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  HostPaths Paths() const { return HostPaths(root_ / "proc", root_ / "sys"); }

 private:
  fs::path root_;
};

// The development VM's /proc/cpuinfo without its hypervisor flag: what the same CPU reports on
// bare metal.
std::string BareMetalCpuinfo() {
  std::string text = ReadFixture(kLinux618 / "proc/cpuinfo");
  for (size_t at; (at = text.find(" hypervisor")) != std::string::npos;) {
    text.erase(at, std::string(" hypervisor").size());
  }
  return text;
}

}  // namespace

TEST_CASE("x86: the cpuinfo hypervisor flag decides, DMI names", "[kernel][hypervisor]") {
  // The development VM (captured verbatim): the flag, no DMI, no /sys/hypervisor.
  std::optional<Hypervisor> dev =
      DetectHypervisor(HostPaths(kLinux618 / "proc", kLinux618 / "sys"));
  REQUIRE(dev);
  CHECK(dev->name == "unknown");
  CHECK(dev->evidence == "cpuinfo flag hypervisor");
  CHECK(CpuinfoHypervisorFlag(ReadFixture(kLinux618 / "proc/cpuinfo")) == true);

  Tree tree;
  tree.Write("proc/cpuinfo", ReadFixture(kLinux618 / "proc/cpuinfo"));
  tree.Write("sys/class/dmi/id/sys_vendor", "QEMU\n");
  tree.Write("sys/class/dmi/id/product_name", "Standard PC (i440FX + PIIX, 1996)\n");
  std::optional<Hypervisor> qemu = DetectHypervisor(tree.Paths());
  REQUIRE(qemu);
  CHECK(qemu->name == "qemu");
  CHECK(qemu->evidence == "cpuinfo flag hypervisor, DMI QEMU");

  // A bare-metal cloud instance keeps its cloud's DMI vendor: the missing flag decides.
  tree.Write("proc/cpuinfo", BareMetalCpuinfo());
  tree.Write("sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
  tree.Write("sys/class/dmi/id/product_name", "c5.metal\n");
  CHECK(CpuinfoHypervisorFlag(BareMetalCpuinfo()) == false);
  CHECK_FALSE(DetectHypervisor(tree.Paths()));
  // Even a VM-only vendor does not override CPUID on x86.
  tree.Write("sys/class/dmi/id/sys_vendor", "QEMU\n");
  CHECK_FALSE(DetectHypervisor(tree.Paths()));
}

TEST_CASE("without x86 flags: /sys/hypervisor, the device tree, then VM-only DMI names",
          "[kernel][hypervisor]") {
  const std::string arm64_cpuinfo =
      "processor\t: 0\nBogoMIPS\t: 125.00\nFeatures\t: fp asimd evtstrm cpuid\n"
      "CPU implementer\t: 0x41\n\n";
  CHECK(CpuinfoHypervisorFlag(arm64_cpuinfo) == std::nullopt);
  Tree tree;
  tree.Write("proc/cpuinfo", arm64_cpuinfo);
  CHECK_FALSE(DetectHypervisor(tree.Paths()));  // nothing says VM: bare metal

  // A Graviton metal instance: a cloud vendor is not proof.
  tree.Write("sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
  tree.Write("sys/class/dmi/id/product_name", "c6g.metal\n");
  CHECK_FALSE(DetectHypervisor(tree.Paths()));

  tree.Write("sys/class/dmi/id/product_name", "KVM Virtual Machine\n");
  std::optional<Hypervisor> kvm = DetectHypervisor(tree.Paths());
  REQUIRE(kvm);
  CHECK(kvm->name == "kvm");

  Tree virt;
  virt.Write("proc/cpuinfo", arm64_cpuinfo);
  virt.Write("proc/device-tree/compatible", std::string("linux,dummy-virt\0", 17));
  std::optional<Hypervisor> board = DetectHypervisor(virt.Paths());
  REQUIRE(board);
  CHECK(board->name == "qemu");

  virt.Write("sys/hypervisor/type", "xen\n");
  std::optional<Hypervisor> xen = DetectHypervisor(virt.Paths());
  REQUIRE(xen);
  CHECK(xen->name == "xen");
  CHECK(xen->evidence == "/sys/hypervisor/type xen");
}

TEST_CASE("DMI names only what exists solely as a VM unless told otherwise",
          "[kernel][hypervisor]") {
  CHECK(HypervisorFromDmi("QEMU", "Standard PC (Q35 + ICH9, 2009)", true) == "qemu");
  CHECK(HypervisorFromDmi("VMware, Inc.", "VMware7,1", true) == "vmware");
  CHECK(HypervisorFromDmi("Microsoft Corporation", "Virtual Machine", true) == "microsoft");
  CHECK(HypervisorFromDmi("Google", "Google Compute Engine", true) == "google");
  CHECK(HypervisorFromDmi("Amazon EC2", "m5.large", true) == std::nullopt);
  CHECK(HypervisorFromDmi("Amazon EC2", "m5.large", false) == "amazon");
  CHECK(HypervisorFromDmi("Dell Inc.", "PowerEdge R650", false) == std::nullopt);
  CHECK(HypervisorFromDmi("", "", false) == std::nullopt);
}
