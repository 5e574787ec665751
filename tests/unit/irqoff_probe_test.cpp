// The IRQ-off detector without the kernel: which mechanism a kernel's features lead to (fake
// kernels for the ones this machine lacks: preemptirq tracepoints, NMI-capable PMUs), how a raw
// event becomes a region, and the symbolizer's view of module and BPF frames.
#include "probes/irqoff/irqoff_probe.h"

#include <linux/types.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "fake_kernel_features.h"
#include "probes/collect/probe_attacher.h"
#include "probes/irqoff/irqoff.h"
#include "probes/kernel/kernel_symbolizer.h"

using namespace kpath;

namespace {

// A kernel without kprobes whose tracefs holds no event unless a test adds it.
FakeKernelFeatures Kernel() {
  FakeKernelFeatures k;
  k.tracefs = std::filesystem::path("/x");
  return k;
}

// The first plan Supported() accepts, as AttachFirstSupported would try it.
std::optional<AttachPlan> FirstSupported(IrqOffProbe& probe,
                                         std::vector<std::string>* reasons = nullptr) {
  for (const AttachPlan& plan : probe.Plans()) {
    absl::Status s = probe.Supported(plan);
    if (s.ok()) return plan;
    if (reasons) reasons->push_back(std::string(s.message()));
  }
  return std::nullopt;
}

struct ProbeUnderTest {
  FakeKernelFeatures kernel = Kernel();
  FakeKernelFeatures* irq = &kernel;  // the perf sources of the kernel
  std::unique_ptr<IrqOffProbe> probe;

  explicit ProbeUnderTest(IrqOffConfig config = {}) {
    probe = std::make_unique<IrqOffProbe>(
        kernel, HostPaths("/nonexistent", "/x"), std::vector<Mechanism>{},
        IrqOffOptions{.detector = config, .labels = {}, .pods = nullptr});
  }
};

TEST_CASE("irqoff plans go from exact tracepoints to NMI sampling to software timers",
          "[irqoff][mechanisms]") {
  ProbeUnderTest t(
      IrqOffConfig{.threshold = absl::Milliseconds(10), .period = absl::Microseconds(1500)});
  std::vector<AttachPlan> plans = t.probe->Plans();
  REQUIRE(plans.size() == 5);
  CHECK(plans[0].mechanism == Mechanism::kTpBtf);
  CHECK(plans[1].mechanism == Mechanism::kRawTp);
  CHECK(plans[2].mechanism == Mechanism::kTracepoint);
  CHECK(plans[3].mechanism == Mechanism::kPerfEvent);
  CHECK(plans[3].target == "cycles NMI + cpu-clock every 1.5ms");
  CHECK(plans[4].mechanism == Mechanism::kPerfEvent);
  CHECK(plans[4].target == "cpu-clock every 1.5ms");
}

TEST_CASE("a kernel like the development VM (no preemptirq, no PMU) gets software timers",
          "[irqoff][mechanisms]") {
  ProbeUnderTest t;
  std::vector<std::string> reasons;
  std::optional<AttachPlan> plan = FirstSupported(*t.probe, &reasons);
  REQUIRE(plan);
  CHECK(plan->target.rfind("cpu-clock", 0) == 0);
  REQUIRE(reasons.size() == 4);
  CHECK(reasons[0].find("CONFIG_PREEMPTIRQ_TRACEPOINTS") != std::string::npos);
  CHECK(reasons[1].find("CONFIG_PREEMPTIRQ_TRACEPOINTS") != std::string::npos);
  CHECK(reasons[3].find("no hardware PMU") != std::string::npos);
}

TEST_CASE("a kernel with an NMI-capable PMU gets NMI sampling", "[irqoff][mechanisms]") {
  ProbeUnderTest t;
  t.irq->pmu_nmi = true;
  std::optional<AttachPlan> plan = FirstSupported(*t.probe);
  REQUIRE(plan);
  CHECK(plan->mechanism == Mechanism::kPerfEvent);
  CHECK(plan->target.rfind("cycles NMI", 0) == 0);
  // Without the software clock that stamps "IRQs on", NMIs alone are no use.
  t.irq->software = false;
  CHECK_FALSE(FirstSupported(*t.probe));
}

TEST_CASE("a debug kernel with preemptirq tracepoints gets exact lengths", "[irqoff][mechanisms]") {
  ProbeUnderTest t;
  t.irq->pmu_nmi = true;
  t.kernel.btf_tracepoints = {{"irq_disable", 2}, {"irq_enable", 2}};
  std::optional<AttachPlan> plan = FirstSupported(*t.probe);
  REQUIRE(plan);
  CHECK(plan->mechanism == Mechanism::kTpBtf);

  // Without BTF: raw tracepoints, found through kallsyms or tracefs.
  t.kernel.btf = false;
  t.kernel.tracepoints = {"preemptirq/irq_disable", "preemptirq/irq_enable"};
  plan = FirstSupported(*t.probe);
  REQUIRE(plan);
  CHECK(plan->mechanism == Mechanism::kRawTp);

  // The classic tracepoint needs caller_offs and parent_offs in its format.
  ProbeUnderTest u;
  absl::StatusOr<TracepointFormat> format = ParseTracepointFormat(
      "name: irq_disable\nID: 5\nformat:\n"
      "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
      "\tfield:s32 caller_offs;\toffset:8;\tsize:4;\tsigned:1;\n"
      "\tfield:s32 parent_offs;\toffset:12;\tsize:4;\tsigned:1;\n");
  REQUIRE(format.ok());
  u.kernel.formats["preemptirq/irq_disable"] = *format;
  format->name = "irq_enable";
  u.kernel.formats["preemptirq/irq_enable"] = *format;
  AttachPlan tracepoint = u.probe->Plans()[2];
  CHECK(u.probe->Supported(tracepoint).ok());
}

TEST_CASE("a threshold under two timer periods is refused before anything loads",
          "[irqoff][mechanisms]") {
  ProbeUnderTest t(
      IrqOffConfig{.threshold = absl::Milliseconds(3), .period = absl::Milliseconds(2)});
  absl::Status s = t.probe->Start();
  CHECK(absl::IsInvalidArgument(s));
  REQUIRE(t.probe->Probes().size() == 1);
  CHECK(t.probe->Probes()[0].mechanism == Mechanism::kNone);
}

// --- regions from events ----------------------------------------------------------------------

std::filesystem::path WriteTemp(const std::string& name, const std::string& text) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kpath-irqoff-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "proc");
  std::ofstream(dir / "proc" / name) << text;
  return dir;
}

constexpr const char* kKallsyms =
    "ffffffff81000000 T _stext\n"
    "ffffffff81001000 T _raw_spin_unlock_irqrestore\n"
    "ffffffff81002000 t count_partial.isra.0\n"
    "ffffffff81003000 T get_slabinfo\n"
    "ffffffff81004000 T _etext\n"
    "ffffffff82000000 T _sinittext\n"
    "ffffffff82100000 T _einittext\n"
    "ffffffffc0100000 t ftrace_trampoline\t[__builtin__ftrace]\n";

irqoff_event Event(std::initializer_list<uint64_t> stack, uint32_t flags = 0) {
  irqoff_event e{};
  e.length_ns = 23'100'000;
  e.cpu = 1;
  e.pid = 4242;
  e.flags = flags;
  std::strncpy(e.comm, "ss", sizeof(e.comm));
  int i = 0;
  for (uint64_t a : stack) e.stack[i++] = a;
  e.stack_size = i * 8;
  return e;
}

TEST_CASE("a late tick's event becomes a region named by its stack", "[irqoff][region]") {
  std::filesystem::path dir = WriteTemp("kallsyms", kKallsyms);
  absl::StatusOr<KallsymsIndex> index = KallsymsIndex::Parse(kKallsyms);
  REQUIRE(index.ok());
  KernelSymbolizer symbolizer(HostPaths(dir / "proc", dir / "sys"),
                              std::make_shared<const KallsymsIndex>(*index));

  IrqOffRegion region = RegionFromEvent(
      Event({0xffffffff81001019, 0xffffffff8100205e, 0xffffffff8100304c}), symbolizer);
  CHECK(region.seconds == Approx(0.0231));
  CHECK(region.comm == "ss");
  CHECK(region.cpu == 1);
  CHECK(region.culprit == "count_partial");
  CHECK(region.frames ==
        std::vector<std::string>{"_raw_spin_unlock_irqrestore", "count_partial", "get_slabinfo"});
  CHECK(DescribeRegion(region) ==
        "23.1 ms on CPU 1 in ss (pid 4242), culprit count_partial; stack: "
        "_raw_spin_unlock_irqrestore <- count_partial <- get_slabinfo");

  // Delivered to user code: no kernel frames, no culprit.
  region = RegionFromEvent(Event({}, IRQOFF_EVENT_USER_MODE), symbolizer);
  CHECK(region.culprit == "unknown");
  CHECK(region.user_mode);
  // Landed in the next thread: its stack says nothing about the holder.
  region = RegionFromEvent(
      Event({0xffffffff81001019, 0xffffffff8100205e}, IRQOFF_EVENT_TASK_SWITCHED), symbolizer);
  CHECK(region.culprit == "unknown");
  CHECK(DescribeRegion(region).find("landed in the next thread") != std::string::npos);

  // preemptirq: the code that disabled IRQs comes first.
  irqoff_event e = Event({0xffffffff8100304c});
  e.disable_site[0] = 0xffffffff81001010;  // _raw_spin_lock_irqsave's own frame: plumbing
  e.disable_site[1] = 0xffffffff81002010;
  region = RegionFromEvent(e, symbolizer);
  CHECK(region.culprit == "count_partial");
  std::filesystem::remove_all(dir);
}

TEST_CASE("module and BPF frames are named from kallsyms re-read at most once per refresh",
          "[irqoff][symbolizer]") {
  std::filesystem::path dir = WriteTemp("kallsyms", kKallsyms);
  absl::StatusOr<KallsymsIndex> index = KallsymsIndex::Parse(kKallsyms);
  REQUIRE(index.ok());
  auto now = std::chrono::steady_clock::time_point{};
  KernelSymbolizer symbolizer(HostPaths(dir / "proc", dir / "sys"),
                              std::make_shared<const KallsymsIndex>(*index),
                              std::chrono::seconds(10), [&] { return now; });
  const uint64_t bpf_address = 0xffffffffc0200040;
  std::vector<uint64_t> addresses = {bpf_address, 0xffffffff8100205e};
  std::vector<std::optional<std::string>> names = symbolizer.Symbolize(addresses);
  // Before the program is listed, its address falls after the last module symbol.
  CHECK(names[0] == std::optional<std::string>("ftrace_trampoline"));
  CHECK(names[1] == std::optional<std::string>("count_partial"));

  std::ofstream(dir / "proc" / "kallsyms", std::ios::app)
      << "ffffffffc0200000 t bpf_prog_6deef7357e7b4530_hold_irqs_off\t[bpf]\n";
  now += std::chrono::seconds(5);  // too soon: not re-read
  CHECK(symbolizer.Symbolize(addresses)[0] == std::optional<std::string>("ftrace_trampoline"));
  now += std::chrono::seconds(6);
  CHECK(symbolizer.Symbolize(addresses)[0] ==
        std::optional<std::string>("bpf_prog_6deef7357e7b4530_hold_irqs_off"));
  CHECK(symbolizer.reloads() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("kallsyms outside vmlinux: text bounds, module lines and named data symbols",
          "[irqoff][symbolizer]") {
  std::string text = std::string(kKallsyms) + "0000000000012340 D steal_time\n";
  const std::string_view wanted[] = {"steal_time", "kernel_cpustat"};
  absl::StatusOr<KallsymsOutsideVmlinux> parsed = ParseKallsymsOutsideVmlinux(text, wanted);
  REQUIRE(parsed.ok());
  CHECK(parsed->text_begin == 0xffffffff81000000);
  CHECK(parsed->text_end == 0xffffffff81004000);
  CHECK(parsed->init_begin == 0xffffffff82000000);
  CHECK(parsed->init_end == 0xffffffff82100000);
  REQUIRE(parsed->modules);
  CHECK(parsed->modules->size() == 1);
  CHECK(parsed->listed_names == std::vector<std::string>{"steal_time"});
  CHECK_FALSE(ParseKallsymsOutsideVmlinux("garbage\n").ok());
}

TEST_CASE("the 6.18 fixture kallsyms gives vmlinux text bounds", "[irqoff][symbolizer]") {
  std::ifstream in(std::filesystem::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64/proc/kallsyms");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<KallsymsOutsideVmlinux> parsed = ParseKallsymsOutsideVmlinux(text.str());
  REQUIRE(parsed.ok());
  CHECK(parsed->text_begin == 0xffffffff81000000);
  REQUIRE(parsed->modules);  // [__builtin__ftrace]
}

}  // namespace
