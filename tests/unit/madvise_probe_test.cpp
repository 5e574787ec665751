// The madvise and TLB-flush probes' user-space logic without a kernel: advice and reason names,
// label hygiene, the STATUS= storm fragment, and how each mechanism's argument layout and the
// process_madvise companion are chosen from what a (fake) kernel offers.
#include "probes/madvise/madvise_probe.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "daemon/config.h"
#include "fake_kernel_features.h"
#include "probes/madvise/madvise.h"
#include "probes/madvise/tlb_flush.h"
#include "probes/madvise/tlb_flush_probe.h"

namespace kpath {
namespace {

namespace fs = std::filesystem;

const fs::path kLinux618 = fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

// A kernel with BTF and kprobes whose tracepoint formats come from the 6.18 fixtures.
FakeKernelFeatures FixtureKernel() {
  FakeKernelFeatures k;
  k.kprobes = true;
  k.tracefs = kLinux618;
  k.fixture_tree = kLinux618;
  return k;
}

// The x86_64 6.18 development kernel as far as the madvise probe asks (do_madvise with mm,
// vector_madvise, both syscall tracepoints).
FakeKernelFeatures Linux618() {
  FakeKernelFeatures k = FixtureKernel();
  for (const char* fn :
       {"__x64_sys_madvise", "__x64_sys_process_madvise", "do_madvise", "vector_madvise"}) {
    k.btf_functions.insert(fn);
    k.kallsyms.insert(fn);
  }
  k.btf_params["__x64_sys_madvise"] = {"regs"};
  k.btf_params["__x64_sys_process_madvise"] = {"regs"};
  k.btf_params["do_madvise"] = {"mm", "start", "len_in", "behavior"};
  k.tracepoints = {"syscalls/sys_enter_madvise", "syscalls/sys_enter_process_madvise"};
  return k;
}

TEST_CASE("advice names follow the metrics contract in enum madvise_advice order", "[madvise]") {
  CHECK(MadviseAdviceName(MADVISE_ADVICE_DONTNEED) == "dontneed");
  CHECK(MadviseAdviceName(MADVISE_ADVICE_FREE) == "free");
  CHECK(MadviseAdviceName(MADVISE_ADVICE_WILLNEED) == "willneed");
  CHECK(MadviseAdviceName(MADVISE_ADVICE_COLD) == "cold");
  CHECK(MadviseAdviceName(MADVISE_ADVICE_PAGEOUT) == "pageout");
  CHECK(MadviseAdviceName(MADVISE_ADVICE_HUGEPAGE) == "hugepage");
  CHECK(MadviseAdviceName(MADVISE_ADVICE_NOHUGEPAGE) == "nohugepage");
  CHECK(MadviseAdviceName(MADVISE_ADVICE_COLLAPSE) == "collapse");
  CHECK(MadviseAdviceName(MADVISE_ADVICE_OTHER) == "other");
  CHECK(MadviseAdviceName(12345) == "other");
}

TEST_CASE("comm labels stop at NUL and replace bytes that are not printable ASCII", "[madvise]") {
  const char plain[16] = "gateway";
  CHECK(CommLabel(plain, sizeof(plain)) == "gateway");
  const char full[16] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h',
                         'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p'};  // no NUL at all
  CHECK(CommLabel(full, sizeof(full)) == "abcdefghijklmnop");
  const char odd[16] = "a\"b\n\xff\x01z";
  CHECK(CommLabel(odd, sizeof(odd)) == "a\"b???z");
}

TEST_CASE("the STATUS fragment names a storm only at or above the threshold", "[madvise]") {
  CHECK(MadviseStormFragment("gateway", 41234, 1000) == "madvise storm: gateway 41.2k calls/s");
  CHECK(MadviseStormFragment("gateway", 1000, 1000) == "madvise storm: gateway 1000 calls/s");
  CHECK(MadviseStormFragment("gateway", 2.5e6, 1000) == "madvise storm: gateway 2.5M calls/s");
  CHECK(MadviseStormFragment("gateway", 999, 1000).empty());
  CHECK(MadviseStormFragment("", 5000, 1000).empty());
  CHECK(MadviseStormFragment("idle", 0, 1).empty());
}

TEST_CASE("argument layouts come from BTF parameter names", "[madvise]") {
  CHECK(DoMadviseLayout({"mm", "start", "len_in", "behavior"}) == MadviseArgLayout::kMmFirst);
  CHECK(DoMadviseLayout({"start", "len_in", "behavior"}) == MadviseArgLayout::kPlainArgs);
  CHECK(DoMadviseLayout({"regs"}) == MadviseArgLayout::kSyscallRegs);
  CHECK(DoMadviseLayout({"a", "b", "c", "d"}) == std::nullopt);
  CHECK(DoMadviseLayout({}) == std::nullopt);
}

TEST_CASE("madvise plans go from cheapest to the syscall tracepoint", "[madvise]") {
  FakeKernelFeatures kernel = Linux618();
  MadviseProbe probe(kernel, {});
  std::vector<std::string> plans;
  for (const AttachPlan& p : probe.Plans()) {
    plans.push_back(std::string(MechanismName(p.mechanism)) + " " + p.target);
  }
  CHECK(plans == std::vector<std::string>{"fentry __x64_sys_madvise", "fentry __arm64_sys_madvise",
                                          "fentry do_madvise", "kprobe __x64_sys_madvise",
                                          "kprobe __arm64_sys_madvise", "kprobe __se_sys_madvise",
                                          "kprobe sys_madvise", "kprobe do_madvise",
                                          "tracepoint syscalls:sys_enter_madvise"});
}

TEST_CASE("madvise mechanisms are supported where the kernel has what each needs", "[madvise]") {
  FakeKernelFeatures kernel = Linux618();
  MadviseProbe probe(kernel, {});
  auto supported = [&](Mechanism m, const std::string& target) {
    return probe.Supported({m, target});
  };
  CHECK(supported(Mechanism::kFentry, "__x64_sys_madvise").ok());
  CHECK(supported(Mechanism::kFentry, "do_madvise").ok());
  CHECK(supported(Mechanism::kFentry, "__arm64_sys_madvise").code() == absl::StatusCode::kNotFound);
  CHECK(supported(Mechanism::kKprobe, "__x64_sys_madvise").ok());
  CHECK(supported(Mechanism::kKprobe, "sys_madvise").code() == absl::StatusCode::kNotFound);
  CHECK(supported(Mechanism::kTracepoint, "syscalls:sys_enter_madvise").ok());

  SECTION("do_madvise with a prototype never seen is refused, not guessed") {
    kernel.btf_params["do_madvise"] = {"a", "b", "c", "d", "e"};
    absl::Status s = supported(Mechanism::kFentry, "do_madvise");
    CHECK(s.code() == absl::StatusCode::kUnimplemented);
    CHECK(std::string(s.message()) == "unknown prototype do_madvise(a, b, c, d, e) in BTF");
  }
  SECTION("without BTF: wrappers by name, do_madvise refused, no fentry") {
    kernel.btf = false;
    CHECK(supported(Mechanism::kFentry, "__x64_sys_madvise").code() ==
          absl::StatusCode::kUnavailable);
    CHECK(supported(Mechanism::kKprobe, "__x64_sys_madvise").ok());
    absl::Status s = supported(Mechanism::kKprobe, "do_madvise");
    CHECK(s.code() == absl::StatusCode::kUnavailable);
    CHECK(std::string(s.message()).find("unknown without BTF") != std::string::npos);
  }
  SECTION("an arm64 kernel without BTF (4.19): the arm64 wrapper") {
    kernel = FixtureKernel();
    kernel.btf = false;
    kernel.kallsyms = {"__arm64_sys_madvise"};
    CHECK(supported(Mechanism::kKprobe, "__x64_sys_madvise").code() == absl::StatusCode::kNotFound);
    CHECK(supported(Mechanism::kKprobe, "__arm64_sys_madvise").ok());
  }
  SECTION("no kprobes, no tracepoint") {
    kernel.kprobes = false;
    kernel.tracepoints.clear();
    CHECK(supported(Mechanism::kKprobe, "__x64_sys_madvise").code() ==
          absl::StatusCode::kFailedPrecondition);
    CHECK(supported(Mechanism::kTracepoint, "syscalls:sys_enter_madvise").code() ==
          absl::StatusCode::kNotFound);
  }
}

TEST_CASE("process_madvise is hooked alongside madvise without double counting", "[madvise]") {
  FakeKernelFeatures kernel = Linux618();
  MadviseProbe probe(kernel, {});
  SECTION("tracepoint: its own syscall tracepoint") {
    auto c = probe.CompanionFor({Mechanism::kTracepoint, "syscalls:sys_enter_madvise"});
    CHECK(c.target == "syscalls:sys_enter_process_madvise");
  }
  SECTION("tracepoint on a kernel before process_madvise (5.10)") {
    kernel.tracepoints = {"syscalls/sys_enter_madvise"};
    auto c = probe.CompanionFor({Mechanism::kTracepoint, "syscalls:sys_enter_madvise"});
    CHECK_FALSE(c.target.has_value());
    CHECK(c.reason.find("no syscalls:sys_enter_process_madvise tracepoint") == 0);
  }
  SECTION("a syscall wrapper: the matching process_madvise wrapper") {
    CHECK(probe.CompanionFor({Mechanism::kFentry, "__x64_sys_madvise"}).target ==
          "__x64_sys_process_madvise");
    CHECK(probe.CompanionFor({Mechanism::kKprobe, "__x64_sys_madvise"}).target ==
          "__x64_sys_process_madvise");
  }
  SECTION("do_madvise with vector_madvise (6.13+): process_madvise has its own hook") {
    CHECK(probe.CompanionFor({Mechanism::kFentry, "do_madvise"}).target ==
          "__x64_sys_process_madvise");
  }
  SECTION("do_madvise without vector_madvise: process_madvise ranges already reach it") {
    kernel.btf_functions.erase("vector_madvise");
    kernel.kallsyms.erase("vector_madvise");
    auto c = probe.CompanionFor({Mechanism::kFentry, "do_madvise"});
    CHECK_FALSE(c.target.has_value());
    CHECK(c.reason.find("calls do_madvise once per range") != std::string::npos);
  }
}

TEST_CASE("TLB flush reason names match the kernel's tlb_flush print format", "[tlb]") {
  // The captured format's __print_symbolic table: { 0, "flush on task switch" }, ...
  absl::StatusOr<std::string> text =
      ReadFileToString(kLinux618 / "sys/kernel/tracing/events/tlb/tlb_flush/format");
  REQUIRE(text.ok());
  const std::map<std::string, std::string> ours_for_kernel_text = {
      {"flush on task switch", "task_switch"}, {"remote shootdown", "remote_shootdown"},
      {"local shootdown", "local_shootdown"},  {"local MM shootdown", "local_mm_shootdown"},
      {"remote IPI send", "remote_send_ipi"},  {"remote wrong CPU", "remote_wrong_cpu"}};
  std::regex entry(R"re(\{ (\d+), "([^"]+)" \})re");
  size_t seen = 0;
  for (auto it = std::sregex_iterator(text->begin(), text->end(), entry);
       it != std::sregex_iterator(); ++it) {
    uint32_t number = static_cast<uint32_t>(std::stoul((*it)[1]));
    std::string kernel_text = (*it)[2];
    INFO(kernel_text);
    REQUIRE(ours_for_kernel_text.count(kernel_text));
    CHECK(TlbFlushReasonName(number) == ours_for_kernel_text.at(kernel_text));
    ++seen;
  }
  CHECK(seen == TLB_FLUSH_SLOT_OTHER);
  CHECK(TlbFlushReasonName(TLB_FLUSH_SLOT_OTHER) == "other");
  CHECK(TlbFlushReasonName(99) == "other");
}

TEST_CASE("tlb_flush mechanisms: tp_btf, raw_tp, then the classic tracepoint", "[tlb]") {
  FakeKernelFeatures kernel = FixtureKernel();
  TlbFlushProbe probe(kernel, {});
  REQUIRE(probe.Plans().size() == 3);
  CHECK(probe.Plans()[0].mechanism == Mechanism::kTpBtf);
  CHECK(probe.Plans()[2].target == "tlb:tlb_flush");
  // arm64: no tlb_flush tracepoint anywhere.
  CHECK(probe.Supported({Mechanism::kRawTp, "tlb:tlb_flush"}).code() ==
        absl::StatusCode::kNotFound);
  CHECK(probe.Supported({Mechanism::kTracepoint, "tlb:tlb_flush"}).code() ==
        absl::StatusCode::kNotFound);
  kernel.tracepoints = {"tlb/tlb_flush"};
  CHECK(probe.Supported({Mechanism::kRawTp, "tlb:tlb_flush"}).ok());
  CHECK(probe.Supported({Mechanism::kTracepoint, "tlb:tlb_flush"}).ok());
}

TEST_CASE("madvise.storm_calls_per_second is read, bounded and defaults to 1000", "[config]") {
  CHECK(Config{}.madvise.storm_calls_per_second == 1000);
  absl::StatusOr<Config> set = ParseConfig("madvise:\n  storm_calls_per_second: 5000\n", "k.yaml");
  REQUIRE(set.ok());
  CHECK(set->madvise.storm_calls_per_second == 5000);
  absl::StatusOr<Config> zero = ParseConfig("madvise:\n  storm_calls_per_second: 0\n", "k.yaml");
  CHECK(std::string(zero.status().message()) ==
        "k.yaml:2: madvise.storm_calls_per_second: must be from 1 to 100000000, got 0");
  CHECK_FALSE(ParseConfig("madvise:\n  storm_calls_per_second: lots\n", "k.yaml").ok());
  CHECK_FALSE(ParseConfig("madvise:\n  storm: 5\n", "k.yaml").ok());
  absl::StatusOr<Config> probes =
      ParseConfig("probes:\n  madvise:\n    mechanisms: [tracepoint]\n", "k.yaml");
  REQUIRE(probes.ok());
  CHECK(probes->Probe("madvise").mechanisms == std::vector<Mechanism>{Mechanism::kTracepoint});
  CHECK_FALSE(ParseConfig("probes:\n  madvise:\n    mechanisms: [tp_btf]\n", "k.yaml").ok());
}

}  // namespace
}  // namespace kpath
