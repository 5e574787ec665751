// Test support: runs the real kpathd binary as a child process, scrapes it over real HTTP and
// listens on a NOTIFY_SOCKET the test owns, as systemd would.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace kpath::testing {

// A free TCP port on 127.0.0.1 (bound and released; the kernel does not hand it out again soon).
int FreePort();

// A TCP connection to 127.0.0.1:port (blocking, close-on-exec); -1 if it cannot be made.
int ConnectLoopback(int port);

// GET http://127.0.0.1:port/path; nullopt on connection failure or timeout. `extra_headers`:
// more request header lines, each ending in "\r\n".
struct HttpResponse {
  int status = 0;
  std::string headers;  // the status line and header lines
  std::string body;
};
std::optional<HttpResponse> HttpGet(int port, const std::string& path,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(5),
                                    const std::string& extra_headers = "");

// An AF_UNIX datagram socket at a temporary path, as systemd's notify socket.
class NotifySocket {
 public:
  NotifySocket();
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;
  const std::string& path() const { return path_; }
  // Next datagram, or nullopt after `timeout`.
  std::optional<std::string> Receive(std::chrono::milliseconds timeout);
  // Waits for a datagram containing `needle`; returns it.
  std::optional<std::string> WaitFor(const std::string& needle, std::chrono::milliseconds timeout);
  // Every datagram already queued, one a line, without waiting.
  std::string Drain();
  // How many datagrams matching `pattern` arrive within `window`.
  int CountFor(const std::regex& pattern, std::chrono::milliseconds window);

 private:
  int fd_ = -1;
  std::string path_;
  std::filesystem::path dir_;
};

struct KpathdOptions {
  std::vector<std::string> args;           // after the binary name
  std::map<std::string, std::string> env;  // added to the environment
  std::optional<std::string> config_yaml;  // written to a temp file, passed as --config
  bool add_listen = true;                  // append --listen 127.0.0.1:<free port>
  // Executed instead of KpathdBinary(), e.g. a symlink to it under another name (which becomes
  // the process's comm).
  std::optional<std::string> binary;
  // Set JOURNAL_STREAM to the device and inode of the process's stderr (the log file), as
  // systemd does when stderr goes to journald.
  bool journal_stream = false;
};

class KpathdProcess {
 public:
  explicit KpathdProcess(KpathdOptions options);
  ~KpathdProcess();  // SIGKILLs the process if still running
  KpathdProcess(const KpathdProcess&) = delete;
  KpathdProcess& operator=(const KpathdProcess&) = delete;

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  const std::filesystem::path& config_path() const { return config_path_; }

  // Polls /metrics until it serves the first snapshot (true), or the process dies / timeout.
  // The deadline is generous: on a busy host loading every BPF program can take long.
  bool WaitUntilServing(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  std::optional<std::string> Scrape();
  void Signal(int sig);
  // Waits for exit; returns the exit status (WEXITSTATUS, or 128+signal), nullopt on timeout.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  bool Running();
  // Everything the process wrote to stderr and stdout so far.
  std::string Output() const;
  // Waits until Output() contains `needle`; false on timeout.
  bool WaitForOutput(const std::string& needle,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  void RewriteConfig(const std::string& yaml);

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::optional<int> exit_status_;
  std::filesystem::path dir_;
  std::filesystem::path config_path_;
  std::filesystem::path log_path_;
};

// The binary under test (set by CMake).
std::string KpathdBinary();

// Value of the first sample of `name` whose labels include every pair in `labels`
// (exposition text format); nullopt if absent.
std::optional<double> MetricValue(const std::string& exposition, const std::string& name,
                                  const std::map<std::string, std::string>& labels = {});
// Sum of every sample of `name` whose labels include all of `labels` (0 if none).
double SumMetric(const std::string& exposition, const std::string& name,
                 const std::map<std::string, std::string>& labels = {});
// Runs a shell command; returns exit status and combined output.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command, const std::string& stdin_text = "");

bool IsRoot();

// Mount points of tracefs and debugfs in this mount namespace, as /proc/self/mounts lists them.
std::vector<std::string> TraceMounts();

}  // namespace kpath::testing
