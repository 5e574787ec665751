// The foreign-hook inventory's parsers against files of real kernels (tests/fixtures/README.md
// says where each came from): kprobes/list and kprobes/enabled, kprobe_events, uprobe_events,
// dynamic_events, enabled_functions, BPF fdinfo and /proc/<pid>/cgroup.
#include <catch2/catch.hpp>
#include <string>

#include "probes/hooks/bpf_holders.h"
#include "probes/hooks/enabled_functions.h"
#include "probes/hooks/kprobe_list.h"
#include "probes/hooks/probe_events.h"
#include "probes/kernel/host_paths.h"

using namespace kpath;

namespace {

std::string Fixture(const std::string& relative) {
  absl::StatusOr<std::string> text = ReadFileToString(std::string(KPATH_FIXTURES) + "/" + relative);
  INFO(relative);
  REQUIRE(text.ok());
  return *text;
}

KprobeList List(const std::string& text) {
  absl::StatusOr<KprobeList> list = ParseKprobeList(text);
  INFO(text);
  REQUIRE(list.ok());
  return *list;
}

}  // namespace

TEST_CASE(
    "kprobes/list of a 4.19 kernel: every probe with its type, function, offset, module and "
    "flags",
    "[hooks][kprobes]") {
  KprobeList list = List(Fixture("linux-4.19-x86_64/sys/kernel/debug/kprobes/list"));
  REQUIRE(list.entries.size() == 12);
  CHECK(list.unparsed_lines == 0);
  const KprobeListEntry& first = list.entries[0];
  CHECK(first.address == 0xffffffff8a3c2e90);
  CHECK_FALSE(first.is_return);
  CHECK(first.function == "security_file_permission");
  CHECK(first.offset == 0);
  CHECK(first.module.empty());
  CHECK(first.ftrace);
  CHECK_FALSE(first.disabled);
  CHECK(list.entries[1].is_return);
  CHECK(list.entries[1].function == "security_file_permission");
  const KprobeListEntry& execve = list.entries[8];
  CHECK(execve.function == "do_execve");
  CHECK(execve.disabled);
  CHECK(execve.ftrace);
  const KprobeListEntry& fork = list.entries[9];
  CHECK(fork.function == "_do_fork");
  CHECK(fork.offset == 4);
  CHECK(fork.optimized);
  CHECK_FALSE(fork.ftrace);
  CHECK(list.entries[10].module == "xfs");
  CHECK(list.entries[10].ftrace);
  CHECK(list.entries[11].module == "gonemod");
  CHECK(list.entries[11].offset == 0x10);
  CHECK(list.entries[11].gone);
  CHECK_FALSE(list.entries[11].disabled);

  absl::StatusOr<bool> enabled =
      ParseKprobesEnabled(Fixture("linux-4.19-x86_64/sys/kernel/debug/kprobes/enabled"));
  REQUIRE(enabled.ok());
  CHECK(*enabled);
}

TEST_CASE("kprobes/list of an arm64 5.5-rc1 kernel: a disabled kprobe without ftrace",
          "[hooks][kprobes]") {
  KprobeList list = List(Fixture("linux-5.5-rc1-aarch64/sys/kernel/debug/kprobes/list"));
  REQUIRE(list.entries.size() == 1);
  CHECK(list.entries[0].address == 0xffffff801009fe28);
  CHECK(list.entries[0].function == "_do_fork");
  CHECK(list.entries[0].disabled);
  CHECK_FALSE(list.entries[0].ftrace);
}

TEST_CASE(
    "kprobes/list of a 6.0-rc1 kernel: a kretprobe and a disabled kprobe on one address, "
    "with the global switch off",
    "[hooks][kprobes]") {
  KprobeList list = List(Fixture("linux-6.0-rc1-x86_64/sys/kernel/debug/kprobes/list"));
  REQUIRE(list.entries.size() == 2);
  CHECK(list.entries[0].is_return);
  CHECK_FALSE(list.entries[0].disabled);
  CHECK_FALSE(list.entries[1].is_return);
  CHECK(list.entries[1].disabled);
  CHECK(list.entries[1].ftrace);
  CHECK(list.entries[0].address == list.entries[1].address);
  CHECK(list.entries[1].function == "__x64_sys_execve");
  absl::StatusOr<bool> enabled =
      ParseKprobesEnabled(Fixture("linux-6.0-rc1-x86_64/sys/kernel/debug/kprobes/enabled"));
  REQUIRE(enabled.ok());
  CHECK_FALSE(*enabled);
}

TEST_CASE("kprobes/list: hidden addresses, the %pS form, jprobes and garbage lines",
          "[hooks][kprobes]") {
  // An unprivileged reader sees zero addresses (5.0+); without a symbol the kernel prints %pS.
  KprobeList list = List(
      "0000000000000000  k  vfs_read+0x0    [FTRACE]\n"
      "ffffffffc0a01234  k  ext4_file_open+0x8/0x120 [ext4] [DISABLED]\n"
      "ffffffff81000000  j  do_fork+0x0    \n"
      "not a kprobe line\n"
      "\n");
  REQUIRE(list.entries.size() == 3);
  CHECK(list.unparsed_lines == 1);
  CHECK(list.entries[0].address == 0);
  CHECK(list.entries[1].function == "ext4_file_open");
  CHECK(list.entries[1].offset == 8);
  CHECK(list.entries[1].module == "ext4");
  CHECK(list.entries[1].disabled);
  CHECK(list.entries[2].function == "do_fork");  // a jprobe (before 4.15) is a kprobe
  CHECK_FALSE(list.entries[2].is_return);

  CHECK(List("").entries.empty());
  CHECK_FALSE(ParseKprobeList("garbage\nmore garbage\n").ok());
  CHECK_FALSE(ParseKprobesEnabled("2\n").ok());
}

TEST_CASE(
    "kprobe_events of 4.14, 4.19 and 5.15 kernels: kprobes and kretprobes with their "
    "functions",
    "[hooks][events]") {
  ProbeEventList al2 =
      ParseProbeEvents(Fixture("linux-4.14-x86_64/sys/kernel/debug/tracing/kprobe_events"));
  REQUIRE(al2.events.size() == 1);
  CHECK(al2.events[0].type == ProbeEventType::kKprobe);
  CHECK(al2.events[0].group == "kprobes");
  CHECK(al2.events[0].event == "p_sys_execve_bcc_2566");
  CHECK(al2.events[0].target == "sys_execve");

  ProbeEventList old =
      ParseProbeEvents(Fixture("linux-4.19-x86_64/sys/kernel/tracing/kprobe_events"));
  REQUIRE(old.events.size() == 2);
  CHECK(old.events[1].type == ProbeEventType::kKretprobe);
  CHECK(old.events[1].target == "do_sys_open");

  ProbeEventList args =
      ParseProbeEvents(Fixture("linux-5.15-rc2-x86_64/sys/kernel/tracing/kprobe_events"));
  REQUIRE(args.events.size() == 1);
  CHECK(args.events[0].target == "vfs_read");
  CHECK(args.unparsed_lines == 0);
}

TEST_CASE("kprobe_events: maxactive, module symbols, offsets and raw addresses",
          "[hooks][events]") {
  ProbeEventList list = ParseProbeEvents(
      "r128:xiaoff/tcp_accept inet_csk_accept ret=$retval remote_addr=+0($retval):u32\n"
      "p:kprobes/x ext4:ext4_file_open\n"
      "p:kprobes/y vfs_read+16\n"
      "p:kprobes/z 0xffffffff81234560\n"
      "x:what/ever foo\n");
  REQUIRE(list.events.size() == 4);
  CHECK(list.unparsed_lines == 1);
  CHECK(list.events[0].type == ProbeEventType::kKretprobe);
  CHECK(list.events[0].group == "xiaoff");
  CHECK(list.events[0].target == "inet_csk_accept");
  CHECK(list.events[1].module == "ext4");
  CHECK(list.events[1].target == "ext4_file_open");
  CHECK(list.events[2].offset == 16);
  CHECK(list.events[3].by_address);
}

TEST_CASE("uprobe_events of 6.18: the binary and offset of each uprobe", "[hooks][events]") {
  ProbeEventList list =
      ParseProbeEvents(Fixture("linux-6.18.44-x86_64/sys/kernel/tracing/uprobe_events"));
  REQUIRE(list.events.size() == 1);
  CHECK(list.events[0].type == ProbeEventType::kUprobe);
  CHECK(list.events[0].group == "uprobes");
  CHECK(list.events[0].event == "bash_readline");
  CHECK(list.events[0].target == "/usr/bin/bash");
  CHECK(list.events[0].offset == 0xc6c20);

  ProbeEventList with_counter = ParseProbeEvents(
      "r:uprobes/r_libc /usr/lib/x86_64-linux-gnu/libc.so.6:0x0000000000029d90(0x21a0b0)\n");
  REQUIRE(with_counter.events.size() == 1);
  CHECK(with_counter.events[0].type == ProbeEventType::kUretprobe);
  CHECK(with_counter.events[0].offset == 0x29d90);
}

TEST_CASE("dynamic_events of 6.5: kprobes, fprobes and tracepoint probes side by side",
          "[hooks][events]") {
  ProbeEventList list =
      ParseProbeEvents(Fixture("linux-6.5-rc1-x86_64/sys/kernel/tracing/dynamic_events"));
  REQUIRE(list.events.size() == 3);
  CHECK(list.events[0].type == ProbeEventType::kKprobe);
  CHECK(list.events[1].type == ProbeEventType::kFprobe);
  CHECK(list.events[1].target == "vfs_write");
  CHECK(list.events[2].type == ProbeEventType::kTracepointProbe);
  CHECK(list.events[2].target == "sched_overutilized_tp");

  ProbeEventList more = ParseProbeEvents(
      " f:fprobes/vfs_read_exit vfs_read%return arg1=$retval\n"
      "f:test/list_entry vfs_read,!vfs_write,vfs_open\n"
      "e:eprobes/hrstate timer.hrtimer_cancel state=+0x38($hrtimer):u8\n"
      " #  arg1: ARG(0) -> ST_USTRING(offset=0,size=4) -> END\n");
  REQUIRE(more.events.size() == 4);
  CHECK(more.unparsed_lines == 0);
  CHECK(more.events[0].type == ProbeEventType::kFprobeReturn);
  CHECK(more.events[1].target == "vfs_read");
  CHECK(more.events[2].target == "vfs_open");  // vfs_write is excluded ("!")
  CHECK(more.events[3].type == ProbeEventType::kOther);
}

TEST_CASE("enabled_functions of 6.11: BPF trampolines (direct) told from other ftrace users",
          "[hooks][ftrace]") {
  FtraceFunctionList list =
      ParseEnabledFunctions(Fixture("linux-6.11-x86_64/sys/kernel/tracing/enabled_functions"));
  REQUIRE(list.functions.size() == 3);
  CHECK(list.unparsed_lines == 0);
  CHECK(list.functions[0].function == "free_user_ns");
  CHECK(list.functions[0].users == 1);
  CHECK_FALSE(list.functions[0].direct);
  CHECK(list.functions[1].function == "bpf_lsm_path_mkdir");
  CHECK(list.functions[1].direct);
  CHECK(list.functions[2].direct);
}

TEST_CASE("enabled_functions: kprobe handlers, shared ops lists and the function tracer",
          "[hooks][ftrace]") {
  FtraceFunctionList list = ParseEnabledFunctions(
      "ip_send_skb (1) R          tramp: 0xffffffffc0471000 (kprobe_ftrace_handler+0x0/0x1c0) "
      "->kprobe_ftrace_handler+0x0/0x1c0\n"
      "vfs_read (2)            ->arch_ftrace_ops_list_func+0x0/0x210\n"
      "vfs_open (1)    tramp: 0xffffffff (function_trace_call+0x0/0x1b0) "
      "->function_trace_call+0x0/0x1b0\n"
      "tcp_drop (1) R I D      tramp: ftrace_regs_caller+0x0/0x58 (call_direct_funcs+0x0/0x30)\n"
      "\tdirect-->bpf_trampoline_6442550536_0+0x0/0x1000\n");
  REQUIRE(list.functions.size() == 4);
  CHECK(list.functions[0].kprobe);
  CHECK_FALSE(list.functions[0].direct);
  CHECK(list.functions[1].users == 2);
  CHECK(list.functions[1].handler == "arch_ftrace_ops_list_func");
  CHECK(list.functions[2].handler == "function_trace_call");
  CHECK(list.functions[3].direct);
}

TEST_CASE("fdinfo of BPF program and link fds (6.18) gives their ids", "[hooks][owners]") {
  const std::string root = "bpf-holders-linux-6.18.44-x86_64/proc/31951/fdinfo/";
  BpfFdinfo program = ParseBpfFdinfo(Fixture(root + "5"));
  CHECK(program.prog_id == 2874u);
  CHECK_FALSE(program.link_id);
  BpfFdinfo link = ParseBpfFdinfo(Fixture(root + "13"));
  CHECK(link.link_id == 742u);
  CHECK(link.prog_id == 2876u);
  CHECK(link.link_type == "raw_tracepoint");
}

TEST_CASE("the systemd unit of a process from /proc/<pid>/cgroup, transient names folded",
          "[hooks][owners]") {
  // Captured on the development machine: hybrid hierarchy, not under systemd.
  CHECK(SystemdUnitOfCgroupFile(Fixture("bpf-holders-linux-6.18.44-x86_64/proc/31951/cgroup")) ==
        "");
  CHECK(SystemdUnitOfCgroupFile("0::/system.slice/cloudwalker-agent.service\n") ==
        "cloudwalker-agent.service");
  CHECK(SystemdUnitOfCgroupFile(
            "12:memory:/x\n1:name=systemd:/system.slice/falcon.service\n0::/\n") ==
        "falcon.service");
  CHECK(SystemdUnitOfCgroupFile("0::/system.slice/foo.service/payload\n") == "foo.service");
  CHECK(SystemdUnitOfCgroupFile("0::/user.slice/user-0.slice/session-17.scope\n") ==
        "session-*.scope");
  CHECK(SystemdUnitOfCgroupFile("0::/system.slice/run-u4711.scope\n") == "run-*.scope");
  CHECK(SystemdUnitOfCgroupFile("0::/kubepods/besteffort/pod1234/abcdef\n") == "");
}
