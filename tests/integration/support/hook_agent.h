// Shared by the foreign-hook tests (seed 002): the stand-in agent (agent/hook_agent) as a child
// process, kpathd under a name of its own, and line writes into tracefs control files.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace kpath::testing {

// Writes `line` and a newline into a control file (tracefs kprobe_events, an enable file):
// appended, or replacing the content. False if the kernel refused it.
bool WriteControlLine(const std::string& file, const std::string& line, bool append);

// The stand-in agent (`binary`, with `args`) as a child process: it places its hooks, prints
// "ready", and runs until its stdin closes. Killed on destruction if it did not exit.
class HookAgent {
 public:
  HookAgent(const std::string& binary, std::vector<std::string> args);
  ~HookAgent();
  HookAgent(const HookAgent&) = delete;
  HookAgent& operator=(const HookAgent&) = delete;

  // True once it printed "ready"; false if it exited or the timeout passed first.
  bool WaitReady(std::chrono::milliseconds timeout);
  // Closes its stdin and waits: its exit status, or -1 if it did not exit within 5 s.
  int Stop();

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
};

// `binary` under a name of its own (a symlink in a temporary directory, removed on destruction):
// `base` and this test process's pid, cut to the 15 characters of a comm, so that the comm tells
// this run's hooks from any other process's on the host, another test run's included.
class NamedBinary {
 public:
  NamedBinary(const std::string& binary, const std::string& base);
  ~NamedBinary();
  NamedBinary(const NamedBinary&) = delete;
  NamedBinary& operator=(const NamedBinary&) = delete;
  const std::string& path() const { return path_; }
  const std::string& comm() const { return comm_; }

 private:
  std::filesystem::path dir_;
  std::string comm_;
  std::string path_;
};

// kpathd as a NamedBinary.
class NamedKpathd : public NamedBinary {
 public:
  explicit NamedKpathd(const std::string& base);
};

}  // namespace kpath::testing
