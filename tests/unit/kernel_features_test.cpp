// Kernel feature probing against text and fixture trees captured from real kernels.
#include "probes/kernel/kernel_features.h"
#include "fixture_text.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>

#include "probes/kernel/host_paths.h"
#include "probes/kernel/kernel_symbolizer.h"

namespace kpath {
namespace {

const std::filesystem::path kFixtures = KPATH_FIXTURES;
const std::filesystem::path kLinux618 = kFixtures / "linux-6.18.44-x86_64";
const std::filesystem::path kLinux419 = kFixtures / "linux-4.19-x86_64";

std::filesystem::path EventFormat(const std::filesystem::path& root, const std::string& event) {
  return root / "sys/kernel/tracing/events" / event / "format";
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST_CASE("format of percpu_alloc_percpu on 6.18 has call_site and bytes_alloc", "[format]") {
  auto format =
      ParseTracepointFormat(ReadFixture(EventFormat(kLinux618, "percpu/percpu_alloc_percpu")));
  REQUIRE(format.ok());
  CHECK(format->name == "percpu_alloc_percpu");
  CHECK(format->id == 645);
  REQUIRE(format->fields.size() == 14);  // 4 common + 10 event fields
  CHECK(format->fields[0].name == "common_type");

  const TracepointField* call_site = format->Find("call_site");
  REQUIRE(call_site != nullptr);
  CHECK(call_site->type == "unsigned long");
  CHECK(call_site->offset == 8);
  CHECK(call_site->size == 8);
  CHECK_FALSE(call_site->is_signed);

  const TracepointField* size = format->Find("size");
  REQUIRE(size != nullptr);
  CHECK(size->offset == 24);
  CHECK(size->size == 8);

  const TracepointField* bytes_alloc = format->Find("bytes_alloc");
  REQUIRE(bytes_alloc != nullptr);
  CHECK(bytes_alloc->type == "size_t");
  CHECK(bytes_alloc->offset == 64);
  CHECK(bytes_alloc->size == 8);

  const TracepointField* off = format->Find("off");
  REQUIRE(off != nullptr);
  CHECK(off->is_signed);
  const TracepointField* ptr = format->Find("ptr");
  REQUIRE(ptr != nullptr);
  CHECK(ptr->type == "void __seg_gs *");
  CHECK(ptr->offset == 56);
  CHECK(format->Find("gfp_flags") != nullptr);
  CHECK(format->Find("no_such_field") == nullptr);
}

TEST_CASE("format of percpu_alloc_percpu on 4.19 lacks call_site and bytes_alloc", "[format]") {
  auto format =
      ParseTracepointFormat(ReadFixture(EventFormat(kLinux419, "percpu/percpu_alloc_percpu")));
  REQUIRE(format.ok());
  CHECK(format->name == "percpu_alloc_percpu");
  CHECK(format->Find("call_site") == nullptr);
  CHECK(format->Find("bytes_alloc") == nullptr);
  const TracepointField* size = format->Find("size");
  REQUIRE(size != nullptr);
  CHECK(size->offset == 16);
  CHECK(size->size == 8);
  const TracepointField* reserved = format->Find("reserved");
  REQUIRE(reserved != nullptr);
  CHECK(reserved->offset == 8);
  CHECK(reserved->size == 1);
}

TEST_CASE("format names __data_loc, array and pointer fields by their identifier", "[format]") {
  auto mkdir = ParseTracepointFormat(ReadFixture(EventFormat(kLinux618, "cgroup/cgroup_mkdir")));
  REQUIRE(mkdir.ok());
  const TracepointField* path = mkdir->Find("path");
  REQUIRE(path != nullptr);
  CHECK(path->type == "__data_loc char[]");
  CHECK(path->offset == 24);
  CHECK(path->size == 4);
  CHECK(mkdir->Find("id")->type == "u64");

  auto madvise =
      ParseTracepointFormat(ReadFixture(EventFormat(kLinux618, "syscalls/sys_enter_madvise")));
  REQUIRE(madvise.ok());
  CHECK(madvise->Find("__syscall_nr")->offset == 8);
  CHECK(madvise->Find("behavior")->offset == 32);

  auto free_fmt =
      ParseTracepointFormat(ReadFixture(EventFormat(kLinux618, "percpu/percpu_free_percpu")));
  REQUIRE(free_fmt.ok());
  CHECK(free_fmt->Find("size") == nullptr);
  CHECK(free_fmt->Find("base_addr")->type == "void *");

  auto comm = ParseTracepointFormat(
      "name: sched_process_exec\nID: 300\nformat:\n"
      "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:1;\n"
      "\tfield:char msg[];\toffset:24;\tsize:0;\tsigned:1;\n"
      "\tfield:const char * name;\toffset:24;\tsize:8;\tsigned:0;\n"
      "\nprint fmt: \"%s\", REC->comm\n");
  REQUIRE(comm.ok());
  REQUIRE(comm->Find("comm") != nullptr);
  CHECK(comm->Find("comm")->type == "char[16]");
  CHECK(comm->Find("comm")->size == 16);
  CHECK(comm->Find("msg") != nullptr);
  CHECK(comm->Find("name")->type == "const char *");
}

TEST_CASE("garbled format text is an InvalidArgument error naming the problem", "[format]") {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"", "no 'name:'"},
      {"\x01\x02\xff garbage", "expected 'name:'"},
      {"name: x\nID: 1\n", "no 'format:'"},
      {"name: x\nID: 1\nformat:\n\nprint fmt: \"\"\n", "no fields"},
      {"name: x\nID: twelve\nformat:\n", "ID is not a number"},
      {"name: x\nformat:\n\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n", "no 'ID:'"},
      {"name: x\nID: 1\nformat:\n\tfield:int a;\toffset:eight;\tsize:4;\tsigned:1;\n",
       "'offset' is not a number"},
      {"name: x\nID: 1\nformat:\n\tfield:int a;\tsize:4;\tsigned:1;\n", "without 'offset:'"},
      {"name: x\nID: 1\nformat:\n\tfield:int a;\toffset:8;\n", "without 'size:'"},
      {"name: x\nID: 1\nformat:\n\tfield:;\toffset:8;\tsize:4;\n", "empty field declaration"},
      {"name: x\nID: 1\nformat:\n\tfield:int [;\toffset:8;\tsize:4;\n", "field name"},
      {"name: x\nID: 1\nformat:\n\tfield:int a;\toffset:8;\tsize:4;\n\tgarbage here\n",
       "line 5: expected 'field:'"},
      {"name: x\nID: 1\nformat:\n\tfield:int a;\toffset:4294967295;\tsize:4;\n", "beyond"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto format = ParseTracepointFormat(c.text);
    REQUIRE_FALSE(format.ok());
    CHECK(format.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(Message(format.status()), Catch::Contains(c.expect));
  }
  // Truncations of a real file at every byte never crash.
  std::string real = ReadFixture(EventFormat(kLinux618, "percpu/percpu_alloc_percpu"));
  for (size_t n = 0; n < 1200; ++n) (void)ParseTracepointFormat(real.substr(0, n));
}

// Real lines from 6.18 plus the forms only other machines show (modules, hidden addresses).
constexpr const char* kKallsyms =
    "ffffffff81000000 T _stext\n"
    "ffffffff81212d72 t pcpu_alloc_noprof.cold\n"
    "ffffffff815db920 t pcpu_alloc_area\n"
    "ffffffff815dcf90 T __pfx_pcpu_alloc_noprof\n"
    "ffffffff815dcfa0 T pcpu_alloc_noprof\n"
    "ffffffff815dd800 t free_percpu.part.0\n"
    "ffffffff816a7650 t mem_cgroup_css_free\n"
    "ffffffff816b0000 t only_cold.cold\n"
    "ffffffff816b1000 t both.constprop.0.isra.0\n"
    "ffffffff816b2000 t kzalloc_noprof.constprop.0\n"
    "ffffffff816b3000 t kzalloc_noprof.isra.0\n"
    "ffffffff816b4000 t weird.isra\n"
    "ffffffff82264b30 t mem_cgroup_css_alloc.isra.0\n"
    "ffffffff82300000 D __tracepoint_percpu_alloc_percpu\n"
    "ffffffff82300100 d some_data\n"
    "ffffffffc0a01000 t foo_bar\t[ext4]\n"
    "ffffffffc0a02000 T ext4_fill_super.constprop.0\t[ext4]\n";

TEST_CASE("kallsyms resolves exact names and compiler clones, never .cold", "[kallsyms]") {
  auto index = KallsymsIndex::Parse(kKallsyms);
  REQUIRE(index.ok());
  CHECK_FALSE(index->AddressesHidden());
  CHECK(index->ResolveFunction("pcpu_alloc_noprof") == "pcpu_alloc_noprof");
  CHECK(index->ResolveFunction("mem_cgroup_css_alloc") == "mem_cgroup_css_alloc.isra.0");
  CHECK(index->ResolveFunction("free_percpu") == "free_percpu.part.0");
  CHECK(index->ResolveFunction("both") == "both.constprop.0.isra.0");
  CHECK(index->ResolveFunction("kzalloc_noprof") == "kzalloc_noprof.isra.0");  // shortest
  CHECK(index->ResolveFunction("only_cold") == std::nullopt);
  CHECK(index->ResolveFunction("weird") == std::nullopt);       // suffix without a clone number
  CHECK(index->ResolveFunction("pcpu_alloc") == std::nullopt);  // a prefix is not a clone
  CHECK(index->ResolveFunction("mem_cgroup_css") == std::nullopt);
  CHECK(index->ResolveFunction("some_data") == std::nullopt);  // data symbols are not functions
  CHECK(index->ResolveFunction("") == std::nullopt);
  CHECK(index->ResolveFunction("foo_bar") == "foo_bar");  // module function
  CHECK(index->ResolveFunction("ext4_fill_super") == "ext4_fill_super.constprop.0");
  CHECK(index->HasSymbol("pcpu_alloc_area"));
  CHECK_FALSE(index->HasSymbol("__pfx_pcpu_alloc_noprof"));  // padding, not a function
  CHECK_FALSE(index->HasSymbol("some_data"));
  CHECK(index->HasTracepoint("percpu_alloc_percpu"));
  CHECK_FALSE(index->HasTracepoint("percpu_free_percpu"));
}

TEST_CASE("kallsyms symbolizes to the containing function without offset or suffix", "[kallsyms]") {
  auto index = KallsymsIndex::Parse(kKallsyms);
  REQUIRE(index.ok());
  CHECK(index->Symbolize(0xffffffff815dcfa0) == "pcpu_alloc_noprof");
  CHECK(index->Symbolize(0xffffffff815dd123) == "pcpu_alloc_noprof");
  CHECK(index->Symbolize(0xffffffff82264b99) == "mem_cgroup_css_alloc");
  CHECK(index->Symbolize(0xffffffff81212d80) == "pcpu_alloc_noprof");  // its .cold fragment
  CHECK(index->Symbolize(0xffffffff816b1004) == "both");
  CHECK(index->Symbolize(0xffffffffc0a01010) == "foo_bar");  // no module prefix
  CHECK(index->Symbolize(0xffffffffc0a02010) == "ext4_fill_super");
  CHECK(index->Symbolize(0xffffffff80ffffff) == std::nullopt);  // below the first symbol
  CHECK(index->Symbolize(0) == std::nullopt);
}

TEST_CASE("kallsyms gives a function's text up to the next function", "[kallsyms]") {
  auto index = KallsymsIndex::Parse(
      "ffffffff81000100 T early\n"
      "ffffffff81000100 T early_alias\n"
      "ffffffff810001f0 t __pfx_next\n"
      "ffffffff81000200 t next\n"
      "ffffffff81000300 D some_data\n");
  REQUIRE(index.ok());
  CHECK(index->FunctionText("early") ==
        std::make_optional(std::pair<uint64_t, uint64_t>(0xffffffff81000100, 0xffffffff81000200)));
  CHECK(index->FunctionText("next") == std::nullopt);  // the last function: no end known
  CHECK(index->FunctionText("missing") == std::nullopt);
  CHECK(index->FunctionText("some_data") == std::nullopt);  // not a function
  auto hidden = KallsymsIndex::Parse("0000000000000000 T early\n0000000000000000 T next\n");
  REQUIRE(hidden.ok());
  CHECK(hidden->FunctionText("early") == std::nullopt);
}

TEST_CASE("kallsyms indexes module functions and sorts by address", "[kallsyms]") {
  auto index = KallsymsIndex::Parse(
      "ffffffffc0a02000 t late\t[xfs]\n"
      "ffffffff81000100 T early\n");
  REQUIRE(index.ok());
  CHECK(index->size() == 2);
  CHECK(index->Symbolize(0xffffffff81000200) == "early");
  CHECK(index->Symbolize(0xffffffffc0a02001) == "late");
}

TEST_CASE("kallsyms with every address 0 reports hidden addresses", "[kallsyms]") {
  auto index = KallsymsIndex::Parse(
      "0000000000000000 T _stext\n"
      "0000000000000000 T pcpu_alloc_noprof\n"
      "0000000000000000 t mem_cgroup_css_alloc.isra.0\n");
  REQUIRE(index.ok());
  CHECK(index->AddressesHidden());
  CHECK(index->Symbolize(0xffffffff815dcfa0) == std::nullopt);
  // Names still tell what exists.
  CHECK(index->ResolveFunction("mem_cgroup_css_alloc") == "mem_cgroup_css_alloc.isra.0");
}

TEST_CASE("kallsyms skips garbled lines and rejects a file with none parsable", "[kallsyms]") {
  auto index = KallsymsIndex::Parse(
      "not a kallsyms line\n"
      "ffffffffzz000000 T bad_address\n"
      "ffffffff81000000 TT bad_type\n"
      "ffffffff81000000 T\n"
      "ffffffff81000100 T good\n"
      "ffffffff81000200 t bad_module\t[ext4\n"
      "\n");
  REQUIRE(index.ok());
  CHECK(index->size() == 1);
  CHECK(index->HasSymbol("good"));
  CHECK_FALSE(index->HasSymbol("bad_module"));

  for (const char* text : {"", "\n\n", "hello world\n", "\xff\xfe\x00\x01"}) {
    auto bad = KallsymsIndex::Parse(text);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("kallsyms fixture from 6.18 resolves real clone names", "[kallsyms]") {
  auto index = KallsymsIndex::Parse(ReadFixture(kLinux618 / "proc/kallsyms"));
  REQUIRE(index.ok());
  CHECK(index->size() > 1500);  // 3175 lines, half of them `__pfx_` padding markers
  CHECK_FALSE(index->HasSymbol("__pfx_pcpu_alloc_noprof"));
  CHECK(index->ResolveFunction("pcpu_alloc_noprof") == "pcpu_alloc_noprof");
  CHECK(index->ResolveFunction("mem_cgroup_css_alloc") == "mem_cgroup_css_alloc");
  CHECK(index->ResolveFunction("early_root_info_init") == "early_root_info_init.isra.0");
  CHECK(index->ResolveFunction("pvm_sync_host_cpuid_feat") ==
        "pvm_sync_host_cpuid_feat.constprop.0.isra.0");
  CHECK(index->Symbolize(0xffffffff815dcfa0 + 0x40) == "pcpu_alloc_noprof");
  CHECK(index->ResolveFunction("ftrace_trampoline") == "ftrace_trampoline");  // [module] line
  // 6.18 without CONFIG_KALLSYMS_ALL lists no __tracepoint_ data, but __traceiter_ functions.
  CHECK(index->HasTracepoint("percpu_alloc_percpu"));
}

TEST_CASE("kallsyms keeps each name once, with ~20 bytes per function besides", "[kallsyms]") {
  const std::string text = ReadFixture(kLinux618 / "proc/kallsyms");
  auto index = KallsymsIndex::Parse(text);
  REQUIRE(index.ok());
  // Names of the kept functions (no __pfx_ markers, no data), as the index must hold them.
  size_t name_bytes = 0;
  std::istringstream lines(text);
  for (std::string address, type, name; lines >> address >> type >> name;) {
    if (std::string_view("tTwW").find(type) != std::string_view::npos &&
        !name.starts_with("__pfx_")) {
      name_bytes += name.size();
    }
    lines.ignore(std::numeric_limits<std::streamsize>::max(), '\n');  // a [module] tag
  }
  REQUIRE(name_bytes > 0);
  // Address and name reference (16 bytes), its place in name order (4): no per-symbol string.
  CHECK(index->MemoryBytes() <= name_bytes + 20 * index->size() + 64);
}

TEST_CASE("one kallsyms index is shared while held and parsed anew when modules change",
          "[kallsyms]") {
  HostPaths paths((kLinux618 / "proc").string(), (kLinux618 / "sys").string());
  auto first = SharedKallsymsIndex(paths, "");
  auto second = SharedKallsymsIndex(paths, "");
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(first->get() == second->get());
  // The kernel-feature cache takes the same copy (the fixture has no /proc/modules).
  LiveKernelFeatures features(paths, /*may_mount=*/false);
  CHECK(features.Kallsyms().get() == first->get());

  auto after_module = SharedKallsymsIndex(paths, "ext4 1085440 1 - Live 0x0000000000000000\n");
  REQUIRE(after_module.ok());
  CHECK(after_module->get() != first->get());
  CHECK((*after_module)->ResolveFunction("pcpu_alloc_noprof") == "pcpu_alloc_noprof");

  auto missing = SharedKallsymsIndex(HostPaths("/nonexistent/proc", "/nonexistent/sys"), "");
  CHECK_FALSE(missing.ok());
}

TEST_CASE("kallsyms parses 200k lines quickly", "[kallsyms][perf]") {
  std::string text;
  char line[96];
  for (int i = 0; i < 200000; ++i) {
    std::snprintf(line, sizeof(line), "%016llx %c some_kernel_function_%d%s\n",
                  0xffffffff81000000ULL + 16ULL * static_cast<unsigned long long>(i), "tTdW"[i % 4],
                  i, i % 7 == 0 ? ".isra.0" : "");
    text += line;
  }
  // CPU time of this thread, not wall time: a busy machine (a compiler, a QEMU guest beside the
  // tests) delays the thread but does not make it burn more CPU. The bound catches a parser gone
  // quadratic; speed itself is for bench/.
  auto thread_cpu = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  };
  auto start = thread_cpu();
  auto index = KallsymsIndex::Parse(text);
  auto cpu = thread_cpu() - start;
  REQUIRE(index.ok());
  CHECK(index->size() == 150000);
  CHECK(index->ResolveFunction("some_kernel_function_7") == "some_kernel_function_7.isra.0");
  // Generous for Debug and sanitizer builds; a Release build takes a few tens of ms.
  CHECK(std::chrono::duration_cast<std::chrono::milliseconds>(cpu).count() < 2000);
}

TEST_CASE("cpu lists parse as the kernel writes them", "[cpus]") {
  auto all = ParseCpuList("0-39\n");
  REQUIRE(all.ok());
  CHECK(all->size() == 40);
  CHECK(all->front() == 0);
  CHECK(all->back() == 39);
  CHECK(ParseCpuList("0,2-5,7").value() == std::vector<int>{0, 2, 3, 4, 5, 7});
  CHECK(ParseCpuList("0").value() == std::vector<int>{0});
  CHECK(ParseCpuList("\n").value().empty());  // an empty mask
  for (const char* bad : {"garbage", "0-", "-3", "3-1", "0,,1", "1-2-3", "0x1", "+1", " 1 - 2",
                          "0-4000000000", "99999999999999999999"}) {
    INFO(bad);
    auto cpus = ParseCpuList(bad);
    REQUIRE_FALSE(cpus.ok());
    CHECK(cpus.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

HostPaths Fixture618() { return HostPaths(kLinux618 / "proc", kLinux618 / "sys"); }

TEST_CASE("LiveKernelFeatures over the 6.18 fixture tree", "[live-fixture]") {
  LiveKernelFeatures features(Fixture618(), /*may_mount=*/false);

  auto tracefs = features.Tracefs();
  REQUIRE(tracefs.ok());
  CHECK(*tracefs == kLinux618 / "sys/kernel/tracing");

  auto alloc = features.Tracepoint("percpu", "percpu_alloc_percpu");
  REQUIRE(alloc.ok());
  REQUIRE(alloc->Find("bytes_alloc") != nullptr);
  CHECK(alloc->Find("bytes_alloc")->offset == 64);

  auto missing = features.Tracepoint("percpu", "no_such_event");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(features.Tracepoint("percpu", "../../../../proc").status().code() ==
        absl::StatusCode::kInvalidArgument);

  CHECK(features.TracepointExists("percpu", "percpu_alloc_percpu"));  // kallsyms __traceiter_
  CHECK(features.TracepointExists("cgroup", "cgroup_mkdir"));
  CHECK(features.TracepointExists("syscalls", "sys_enter_madvise"));  // only tracefs knows it
  CHECK_FALSE(features.TracepointExists("percpu", "no_such_event"));

  CHECK(features.KernelFunction("pcpu_alloc_noprof") == "pcpu_alloc_noprof");
  CHECK(features.KernelFunction("__alloc_percpu_gfp") == std::nullopt);  // a macro since 6.10
  REQUIRE(features.Kallsyms() != nullptr);
  CHECK(features.Kallsyms() == features.Kallsyms());  // parsed once

  CHECK(features.PossibleCpus() == 2);

  absl::Status kprobes = features.KprobesAvailable();
  CHECK(kprobes.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(kprobes), Catch::Contains("bus/event_source/devices/kprobe"));
  CHECK_THAT(Message(kprobes), Catch::Contains("kprobe_events"));
  CHECK_THAT(Message(kprobes), Catch::Contains("CONFIG_KPROBES"));

  // The fixture holds no BTF: every BTF question says no instead of failing.
  CHECK_FALSE(features.HasVmlinuxBtf());
  CHECK(features.BtfTracepointArgs("percpu_alloc_percpu") == std::nullopt);
  CHECK_FALSE(features.BtfHasFunction("pcpu_alloc_noprof"));
}

TEST_CASE("LiveKernelFeatures over an empty tree reports what it tried", "[live-fixture]") {
  std::filesystem::path empty = kFixtures / "does-not-exist";
  LiveKernelFeatures features(HostPaths(empty / "proc", empty / "sys"), /*may_mount=*/false);
  auto tracefs = features.Tracefs();
  REQUIRE_FALSE(tracefs.ok());
  CHECK_THAT(Message(tracefs.status()), Catch::Contains("kernel/tracing"));
  CHECK_THAT(Message(tracefs.status()), Catch::Contains("kernel/debug/tracing"));
  // Not NotFound: that would claim the kernel lacks the event.
  CHECK(features.Tracepoint("percpu", "percpu_alloc_percpu").status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(features.Kallsyms() == nullptr);
  CHECK(features.KernelFunction("pcpu_alloc_noprof") == std::nullopt);
  CHECK_FALSE(features.TracepointExists("percpu", "percpu_alloc_percpu"));
  CHECK(features.PossibleCpus() >= 1);  // libbpf's count of this machine
  CHECK_THAT(Message(features.KprobesAvailable()), Catch::Contains("no tracefs"));
}

}  // namespace
}  // namespace kpath

TEST_CASE("ReadFileToString refuses a FIFO or directory at once instead of blocking", "[read]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kpath-read-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  REQUIRE(::mkfifo((dir / "meminfo").c_str(), 0600) == 0);
  using kpath::ReadFileToString;
  absl::StatusOr<std::string> fifo = ReadFileToString(dir / "meminfo");
  absl::StatusOr<std::string> directory = ReadFileToString(dir);
  fs::remove_all(dir);
  REQUIRE_FALSE(fifo.ok());
  CHECK(absl::IsFailedPrecondition(fifo.status()));
  CHECK_THAT(std::string(fifo.status().message()), Catch::EndsWith("meminfo: not a regular file"));
  CHECK_FALSE(directory.ok());
  // A real file still reads.
  CHECK(ReadFileToString(fs::path(KPATH_FIXTURES) / "linux-6.18.44-x86_64/proc/meminfo").ok());
}
