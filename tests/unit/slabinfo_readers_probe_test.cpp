// How the slabinfo-reader probe chooses its hook, against the 6.18 fixture tree's tracefs formats
// (no BTF, no kprobes there, as for a kernel without them) and hand-made ones.
#include "probes/slab/slabinfo_readers_probe.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using namespace kpath;

namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64";

}  // namespace

TEST_CASE("slabinfo readers prefer the open method, then the open syscall tracepoints",
          "[slab][readers]") {
  LiveKernelFeatures kernel(HostPaths(kFixture / "proc", kFixture / "sys"), /*may_mount=*/false);
  SlabinfoReadersProbe probe(kernel, {}, LabelLimits{});
  std::vector<AttachPlan> plans = probe.Plans();
  REQUIRE(plans.size() == 3);
  CHECK(plans[0].mechanism == Mechanism::kFentry);
  CHECK(plans[0].target == "slabinfo_open");
  CHECK(plans[1].mechanism == Mechanism::kKprobe);
  CHECK(plans[2].mechanism == Mechanism::kTracepoint);

  // The fixture tree has no BTF and no kprobes: only the tracepoints remain, and the captured
  // openat/open/openat2 formats put the filename where the BPF program reads it.
  CHECK(absl::IsUnavailable(probe.Supported(plans[0])));
  CHECK_FALSE(probe.Supported(plans[1]).ok());
  CHECK(probe.Supported(plans[2]).ok());
}

TEST_CASE("a tracepoint whose filename is not where the program reads it is not used",
          "[slab][readers]") {
  std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("kpath-readers-test-" + std::to_string(getpid()));
  std::filesystem::path dir = root / "sys/kernel/tracing/events/syscalls/sys_enter_openat";
  std::filesystem::create_directories(dir);
  std::filesystem::create_directories(root / "proc");
  std::ofstream(dir / "format")
      << "name: sys_enter_openat\nID: 1\nformat:\n"
         "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
         "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n"
         "\tfield:const char * filename;\toffset:32;\tsize:8;\tsigned:0;\n";
  {
    LiveKernelFeatures kernel(HostPaths(root / "proc", root / "sys"), /*may_mount=*/false);
    SlabinfoReadersProbe probe(kernel, {}, LabelLimits{});
    absl::Status s = probe.Supported(probe.Plans()[2]);
    CHECK_FALSE(s.ok());
    CHECK(std::string(s.message()).find("offset 24") != std::string::npos);
  }
  std::filesystem::remove_all(root);
}
