#include "support/hook_agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "support/kpathd_process.h"

namespace kpath::testing {

using namespace std::chrono_literals;

bool WriteControlLine(const std::string& file, const std::string& line, bool append) {
  int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC | (append ? O_APPEND : O_TRUNC));
  if (fd < 0) return false;
  std::string text = line + "\n";
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

HookAgent::HookAgent(const std::string& binary, std::vector<std::string> args) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return;
  }
  std::vector<char*> argv{const_cast<char*>(binary.c_str())};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  stdin_ = in[1];
  stdout_ = out[0];
}

HookAgent::~HookAgent() {
  if (Stop() < 0 && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (stdin_ >= 0) close(stdin_);
  if (stdout_ >= 0) close(stdout_);
}

bool HookAgent::WaitReady(std::chrono::milliseconds timeout) {
  if (stdout_ < 0) return false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string seen;
  fcntl(stdout_, F_SETFL, O_NONBLOCK);
  while (std::chrono::steady_clock::now() < deadline) {
    char buffer[256];
    ssize_t n = read(stdout_, buffer, sizeof(buffer));
    if (n > 0) seen.append(buffer, static_cast<size_t>(n));
    if (seen.find("ready\n") != std::string::npos) return true;
    if (n == 0) return false;  // exited
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

int HookAgent::Stop() {
  if (pid_ <= 0) return -1;
  if (stdin_ >= 0) {
    close(stdin_);
    stdin_ = -1;
  }
  for (int i = 0; i < 500; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

NamedBinary::NamedBinary(const std::string& binary, const std::string& base) {
  const std::string pid = std::to_string(getpid());
  comm_ = base.substr(0, 15 - std::min<size_t>(pid.size() + 1, 15)) + "-" + pid;
  comm_.resize(std::min<size_t>(comm_.size(), 15));
  dir_ = std::filesystem::temp_directory_path() / ("kpath-" + comm_);
  std::filesystem::create_directories(dir_);
  path_ = (dir_ / comm_).string();
  std::filesystem::create_symlink(binary, path_);
}

NamedBinary::~NamedBinary() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

NamedKpathd::NamedKpathd(const std::string& base) : NamedBinary(KpathdBinary(), base) {}

}  // namespace kpath::testing
