#include "support/kpathd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace kpath::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {
fs::path MakeTempDir(const char* prefix) {
  std::string templ = (fs::temp_directory_path() / (std::string(prefix) + "XXXXXX")).string();
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  return templ;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

// The kpathd under test: this build's, or KPATH_KPATHD_BINARY (the sanitizer stage's ASan +
// UBSan kpathd, run by the same tests: scripts/test.sh).
std::string KpathdBinary() {
  const char* other = std::getenv("KPATH_KPATHD_BINARY");
  return other != nullptr && *other != '\0' ? other : KPATHD_BINARY;
}

bool IsRoot() { return geteuid() == 0; }

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    throw std::runtime_error("bind to port 0 failed");
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::optional<HttpResponse> HttpGet(int port, const std::string& path,
                                    std::chrono::milliseconds timeout,
                                    const std::string& extra_headers) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int fd = ConnectLoopback(port);
  if (fd < 0) return std::nullopt;
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                        extra_headers + "\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string raw;
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      close(fd);
      return std::nullopt;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos || raw.compare(0, 9, "HTTP/1.1 ") != 0) return std::nullopt;
  HttpResponse r;
  r.status = std::atoi(raw.c_str() + 9);
  std::string headers = raw.substr(0, header_end);
  std::string body = raw.substr(header_end + 4);
  // civetweb answers with chunked encoding for the metrics handler.
  if (headers.find("Transfer-Encoding: chunked") != std::string::npos) {
    std::string decoded;
    size_t pos = 0;
    while (pos < body.size()) {
      size_t eol = body.find("\r\n", pos);
      if (eol == std::string::npos) break;
      size_t len = std::strtoul(body.substr(pos, eol - pos).c_str(), nullptr, 16);
      if (len == 0) break;
      decoded.append(body, eol + 2, len);
      pos = eol + 2 + len + 2;
    }
    body = decoded;
  }
  r.headers = std::move(headers);
  r.body = std::move(body);
  return r;
}

NotifySocket::NotifySocket() {
  dir_ = MakeTempDir("kpath-notify-");
  path_ = (dir_ / "notify.sock").string();
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw std::runtime_error("bind notify socket failed");
  }
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) close(fd_);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::optional<std::string> NotifySocket::Receive(std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
  char buf[4096];
  ssize_t n = recv(fd_, buf, sizeof(buf), 0);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

std::optional<std::string> NotifySocket::WaitFor(const std::string& needle,
                                                 std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    std::optional<std::string> m = Receive(left);
    if (m && m->find(needle) != std::string::npos) return m;
  }
}

std::string NotifySocket::Drain() {
  std::string all;
  while (std::optional<std::string> m = Receive(std::chrono::milliseconds(0))) all += *m + "\n";
  return all;
}

int NotifySocket::CountFor(const std::regex& pattern, std::chrono::milliseconds window) {
  int count = 0;
  const auto deadline = std::chrono::steady_clock::now() + window;
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<std::string> m = Receive(std::chrono::milliseconds(300));
    if (m && std::regex_search(*m, pattern)) ++count;
  }
  return count;
}

KpathdProcess::KpathdProcess(KpathdOptions options) {
  dir_ = MakeTempDir("kpath-test-");
  log_path_ = dir_ / "kpathd.log";
  std::vector<std::string> args{options.binary.value_or(KpathdBinary())};
  if (options.config_yaml) {
    config_path_ = dir_ / "kpathd.yaml";
    RewriteConfig(*options.config_yaml);
    args.push_back("--config");
    args.push_back(config_path_.string());
  }
  for (auto& a : options.args) args.push_back(a);
  if (options.add_listen) {
    port_ = FreePort();
    args.push_back("--listen");
    args.push_back("127.0.0.1:" + std::to_string(port_));
  }
  const pid_t test_pid = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // A test process killed outright (a timeout, ^C) takes its kpathd with it: nothing stays
    // running or attached.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != test_pid) _exit(1);
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    dup2(log, 1);
    dup2(log, 2);
    for (auto& [k, v] : options.env) setenv(k.c_str(), v.c_str(), 1);
    struct stat st {};
    if (options.journal_stream && fstat(2, &st) == 0) {
      setenv("JOURNAL_STREAM",
             (std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)).c_str(), 1);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::perror("execv kpathd");
    _exit(127);
  }
}

KpathdProcess::~KpathdProcess() {
  // SIGTERM, as systemd stops it: kpathd then undoes what it did to the host, unmounting the
  // tracefs and debugfs it mounted. SIGKILL left those mounts behind where they were not mounted
  // before (the QEMU guest, as a fresh host): later tests found them, and ran differently.
  if (Running()) {
    kill(pid_, SIGTERM);
    if (!WaitExit(10s)) {
      kill(pid_, SIGKILL);
      WaitExit(5s);
    }
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void KpathdProcess::RewriteConfig(const std::string& yaml) {
  std::ofstream out(config_path_, std::ios::trunc);
  out << yaml;
  out.close();
  fs::permissions(config_path_, fs::perms::owner_read | fs::perms::owner_write |
                                    fs::perms::group_read | fs::perms::others_read);
}

bool KpathdProcess::Running() {
  if (exit_status_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

std::optional<int> KpathdProcess::WaitExit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(10ms);
  }
  return exit_status_;
}

void KpathdProcess::Signal(int sig) {
  if (Running()) kill(pid_, sig);
}

bool KpathdProcess::WaitUntilServing(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Running()) return false;
    // The port is bound before the probes attach; the first snapshot (with kpath_build_info)
    // is published once they are, as READY=1 is.
    auto r = HttpGet(port_, "/metrics", 2s);
    if (r && r->status == 200 && r->body.find("kpath_build_info") != std::string::npos) {
      return true;
    }
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::optional<std::string> KpathdProcess::Scrape() {
  auto r = HttpGet(port_, "/metrics");
  if (!r || r->status != 200) return std::nullopt;
  return r->body;
}

std::string KpathdProcess::Output() const { return ReadAll(log_path_); }

bool KpathdProcess::WaitForOutput(const std::string& needle,
                                  std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (Output().find(needle) != std::string::npos) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::optional<double> MetricValue(const std::string& exposition, const std::string& name,
                                  const std::map<std::string, std::string>& labels) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.compare(0, name.size(), name) != 0) continue;
    char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      if (line.find(k + "=\"" + v + "\"") == std::string::npos) {
        match = false;
        break;
      }
    }
    if (!match) continue;
    size_t space = line.rfind(' ');
    return std::strtod(line.c_str() + space + 1, nullptr);
  }
  return std::nullopt;
}

double SumMetric(const std::string& exposition, const std::string& name,
                 const std::map<std::string, std::string>& labels) {
  std::istringstream in(exposition);
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, name.size(), name) != 0) continue;
    char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    bool match = true;
    for (const auto& [k, v] : labels) match &= line.find(k + "=\"" + v + "\"") != std::string::npos;
    if (match) sum += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return sum;
}

CommandResult RunCommand(const std::string& command, const std::string& stdin_text) {
  fs::path dir = MakeTempDir("kpath-cmd-");
  fs::path in = dir / "stdin", out = dir / "out";
  {
    std::ofstream f(in);
    f << stdin_text;
  }
  std::string full = "(" + command + ") <" + in.string() + " >" + out.string() + " 2>&1";
  int status = std::system(full.c_str());
  CommandResult r;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.output = ReadAll(out);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return r;
}

std::vector<std::string> TraceMounts() {
  std::vector<std::string> targets;
  std::ifstream in("/proc/self/mounts");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string source, target, type;
    fields >> source >> target >> type;
    if (type == "tracefs" || type == "debugfs") targets.push_back(target);
  }
  return targets;
}

}  // namespace kpath::testing
