// Which way the IRQ-off detector measures regions on the running kernel, checked against what the
// kernel offers, asked independently of kpathd: the preemptirq tracepoints (exact; kernels with
// CONFIG_PREEMPTIRQ_TRACEPOINTS), else hardware-counter NMIs (a PMU whose overflow interrupt is
// an NMI: x86 with a core PMU, arm64 with GICv3 pseudo-NMIs), else the detector's own software
// timer. The development kernel and Debian's 6.1 under QEMU (tests/qemu/run.sh; TCG emulates no
// PMU, Debian builds without preemptirq tracepoints) both take the software timer; a bare-metal
// host would take NMIs.
#include <linux/perf_event.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "support/kpathd_process.h"

using namespace kpath::testing;

namespace {

// The kernel defines the preemptirq:irq_disable tracepoint (kallsyms lists the tracepoint's
// iterator or its data symbol; the tracefs event directory, when tracefs is mounted).
bool HasPreemptIrqTracepoints() {
  for (const char* dir : {"/sys/kernel/tracing/events/preemptirq/irq_disable",
                          "/sys/kernel/debug/tracing/events/preemptirq/irq_disable"}) {
    if (std::filesystem::exists(dir)) return true;
  }
  std::ifstream kallsyms("/proc/kallsyms");
  for (std::string line; std::getline(kallsyms, line);) {
    if (line.ends_with(" __traceiter_irq_disable") || line.ends_with(" __tracepoint_irq_disable"))
      return true;
  }
  return false;
}

// A sampling hardware cycles counter can be opened on CPU 0 and its overflow interrupt is an NMI:
// always on x86; on arm64 only with GICv3 pseudo-NMIs switched on at boot, else it is an ordinary
// IRQ, masked with the rest (Debian's arm64 6.1 under QEMU: the PMU is there, the NMI is not).
bool CanSampleCyclesAsNmi() {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.sample_period = 1000000;
  attr.disabled = 1;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return false;
  close(fd);
#if defined(__aarch64__)
  std::ifstream cmdline("/proc/cmdline");
  std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  return text.find("irqchip.gicv3_pseudo_nmi=1") != std::string::npos;
#else
  return true;
#endif
}

}  // namespace

TEST_CASE("irqoff: the detector takes the most precise method this kernel offers",
          "[irqoff][qemu]") {
  REQUIRE(IsRoot());
  std::string expected = HasPreemptIrqTracepoints() ? "preemptirq"
                         : CanSampleCyclesAsNmi()   ? "nmi"
                                                    : "software_timer";
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 250ms\n"});
  REQUIRE(kpathd.WaitUntilServing());
  auto body = kpathd.Scrape();
  REQUIRE(body);
  INFO(kpathd.Output());
  std::smatch m;
  REQUIRE(std::regex_search(*body, m,
                            std::regex("kpath_irqoff_detector_info\\{[^}]*method=\"([a-z_]+)\"")));
  std::string method = m[1].str();
  CHECK(method == expected);
  CHECK(MetricValue(*body, "kpath_probe_attached", {{"probe", "irqoff"}}) == 1);
  // The resolution: exact with tracepoints, half the timer period otherwise.
  std::optional<double> resolution = MetricValue(*body, "kpath_irqoff_resolution_seconds");
  REQUIRE(resolution);
  CHECK((method == "preemptirq") == (*resolution == 0));
  // The log says why the more precise ways were passed over.
  std::string log = kpathd.Output();
  size_t line = log.find("probe irqoff: attached with");
  REQUIRE(line != std::string::npos);
  std::string attached = log.substr(line, log.find('\n', line) - line);
  if (method != "preemptirq") CHECK(attached.find("PREEMPTIRQ") != std::string::npos);
  std::string release;
  std::getline(std::ifstream("/proc/sys/kernel/osrelease") >> std::ws, release);
  WARN("irqoff on " << release << ": method " << method << "; " << attached);
}
