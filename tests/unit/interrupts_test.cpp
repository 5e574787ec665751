#include "probes/procfs/interrupts.h"
#include "fixture_text.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "probes/collect/metric_families.h"
#include "probes/kernel/host_paths.h"
#include "probes/procfs/interrupts_collector.h"

namespace kpath {
namespace {

namespace fs = std::filesystem;

const fs::path kLinux618 = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

const prometheus::MetricFamily* FindFamily(const MetricFamilies& families,
                                           const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The layout of an arm64 guest's /proc/interrupts (one CPU, GICv3): IPI rows, no TLB row.
// Reproduced from a published capture (an aarch64 VirtualBox guest); arm64 invalidates TLBs
// with broadcast TLBI instructions, so no IPI counts shootdowns.
constexpr const char* kArm64OneCpu =
    "           CPU0       \n"
    " 10:    1454276     GICv3  27 Level     arch_timer\n"
    " 13:      60496     GICv3  37 Level     virtio0\n"
    " 16:          0  ARMH0061:00   3 Edge      power\n"
    "IPI0:         0       Rescheduling interrupts\n"
    "IPI1:         0       Function call interrupts\n"
    "IPI2:         0       CPU stop interrupts\n"
    "IPI3:         0       CPU stop (for crash dump) interrupts\n"
    "IPI4:         0       Timer broadcast interrupts\n"
    "IPI5:         0       IRQ work interrupts\n"
    "IPI6:         0       CPU wake-up interrupts\n"
    "Err:          0\n";

TEST_CASE("ParseInterrupts reads the real 6.18 x86 file: CPU columns, rows, TLB shootdowns",
          "[interrupts]") {
  absl::StatusOr<Interrupts> irq = ParseInterrupts(ReadFixture(kLinux618 / "proc/interrupts"));
  REQUIRE(irq.ok());
  CHECK(irq->cpus() == std::vector<std::string>{"CPU0", "CPU1"});
  // The fixture's TLB row: "TLB:       5711       4802   TLB shootdowns".
  const InterruptRow* tlb = irq->Find("TLB");
  REQUIRE(tlb != nullptr);
  CHECK(tlb->counts == std::vector<uint64_t>{5711, 4802});
  CHECK(tlb->description == "TLB shootdowns");
  CHECK(irq->TlbShootdowns() == 5711 + 4802);

  const InterruptRow* loc = irq->Find("LOC");
  REQUIRE(loc != nullptr);
  CHECK(loc->description == "Local timer interrupts");
  // A device row: the chip and trigger text ("5-edge") stay in the description.
  const InterruptRow* acpi = irq->Find("24");
  REQUIRE(acpi != nullptr);
  CHECK(acpi->counts == std::vector<uint64_t>{1, 0});
  CHECK(acpi->description == "IO-APIC   5-edge      ACPI:Ged");
  // System-wide rows carry one count and no description.
  const InterruptRow* err = irq->Find("ERR");
  REQUIRE(err != nullptr);
  CHECK(err->counts.size() == 1);
  CHECK(err->description.empty());
}

TEST_CASE("ParseInterrupts on arm64: no TLB row, so no shootdown count", "[interrupts]") {
  absl::StatusOr<Interrupts> irq = ParseInterrupts(kArm64OneCpu);
  REQUIRE(irq.ok());
  CHECK(irq->cpus().size() == 1);
  CHECK_FALSE(irq->TlbShootdowns().has_value());
  const InterruptRow* timer = irq->Find("10");
  REQUIRE(timer != nullptr);
  CHECK(timer->counts == std::vector<uint64_t>{1454276});
  // The GIC hardware IRQ number after the chip name is description, not a count.
  CHECK(timer->description == "GICv3  27 Level     arch_timer");
  REQUIRE(irq->Find("IPI1") != nullptr);
  CHECK(irq->Find("IPI1")->description == "Function call interrupts");
}

TEST_CASE("ParseInterrupts rejects garbled text with the line number", "[interrupts]") {
  CHECK(ParseInterrupts("").status().message() == "/proc/interrupts: empty, no CPU header");
  CHECK_FALSE(ParseInterrupts("  CPU0 banana\n").ok());
  absl::Status no_colon = ParseInterrupts("  CPU0 CPU1\nTLB 1 2 TLB shootdowns\n").status();
  CHECK(no_colon.message().find("line 2") != absl::string_view::npos);
  absl::Status overflow =
      ParseInterrupts("  CPU0\nTLB: 99999999999999999999999 TLB shootdowns\n").status();
  CHECK(overflow.message().find("64 bits") != absl::string_view::npos);
  absl::Status repeated = ParseInterrupts("  CPU0\nTLB: 1 x\nTLB: 2 x\n").status();
  CHECK(repeated.message().find("repeated") != absl::string_view::npos);
}

TEST_CASE("ParseInterrupts: a TLB row summed across many CPUs", "[interrupts]") {
  std::string text = "    ";
  std::string tlb = "TLB:";
  uint64_t expected = 0;
  for (int cpu = 0; cpu < 64; ++cpu) {
    // Appended piece by piece: `" " + std::to_string(n)` (operator+ on a temporary, which
    // inserts at its front) trips GCC 12's -Wrestrict false positive at -O3 (GCC bug 105329).
    text += " CPU";
    text += std::to_string(cpu);
    tlb += ' ';
    tlb += std::to_string(1000000 + cpu);
    expected += 1000000 + cpu;
  }
  text += "\n" + tlb + "   TLB shootdowns\n";
  absl::StatusOr<Interrupts> irq = ParseInterrupts(text);
  REQUIRE(irq.ok());
  CHECK(irq->TlbShootdowns() == expected);
}

TEST_CASE("InterruptsCollector exports kpath_tlb_shootdowns_total from the fixture tree",
          "[interrupts]") {
  InterruptsCollector collector(HostPaths(kLinux618 / "proc", kLinux618 / "sys"));
  MetricFamilies out;
  REQUIRE(collector.Collect(out).ok());
  const prometheus::MetricFamily* tlb = FindFamily(out, "kpath_tlb_shootdowns_total");
  REQUIRE(tlb != nullptr);
  REQUIRE(tlb->metric.size() == 1);
  absl::StatusOr<Interrupts> irq = ParseInterrupts(ReadFixture(kLinux618 / "proc/interrupts"));
  REQUIRE(irq.ok());
  CHECK(tlb->metric[0].counter.value == static_cast<double>(*irq->TlbShootdowns()));
}

TEST_CASE("InterruptsCollector without a TLB row succeeds and exports nothing", "[interrupts]") {
  fs::path root = fs::temp_directory_path() / "kpath-interrupts-arm64";
  fs::create_directories(root / "proc");
  {
    FILE* f = std::fopen((root / "proc/interrupts").c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(kArm64OneCpu, f);
    std::fclose(f);
  }
  InterruptsCollector collector(HostPaths(root / "proc", root / "sys"));
  MetricFamilies out;
  CHECK(collector.Collect(out).ok());
  CHECK(FindFamily(out, "kpath_tlb_shootdowns_total") == nullptr);
  fs::remove_all(root);
}

TEST_CASE("InterruptsCollector fails on a missing file, naming it", "[interrupts]") {
  InterruptsCollector collector(HostPaths("/nonexistent/proc", "/nonexistent/sys"));
  MetricFamilies out;
  absl::Status s = collector.Collect(out);
  CHECK_FALSE(s.ok());
  CHECK(s.message().find("/nonexistent/proc/interrupts") != absl::string_view::npos);
}

}  // namespace
}  // namespace kpath
