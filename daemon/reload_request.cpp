#include "daemon/reload_request.h"

#include <signal.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"

namespace kpath {
namespace {

bool IsFromReloader(const siginfo_t& info) {
  return info.si_code == SI_QUEUE && info.si_value.sival_int == kReloadRequestValue;
}

}  // namespace

bool IsReloadRequest(const siginfo_t& info) {
  return info.si_signo == SIGHUP && IsFromReloader(info);
}

void AnswerReloadRequest(pid_t requester, bool applied) {
  sigval value{};
  value.sival_int = kReloadRequestValue;
  // The client may have given up and gone: nothing to do then.
  sigqueue(requester, applied ? SIGUSR1 : SIGUSR2, value);
}

absl::Status RequestReload(pid_t daemon, absl::Duration timeout) {
  if (daemon <= 0) return absl::InvalidArgumentError(fmt::format("--reload {}: not a pid", daemon));
  // Blocked before asking, so that an answer arriving at once waits for sigtimedwait.
  sigset_t answers;
  sigemptyset(&answers);
  sigaddset(&answers, SIGUSR1);
  sigaddset(&answers, SIGUSR2);
  sigprocmask(SIG_BLOCK, &answers, nullptr);
  sigval value{};
  value.sival_int = kReloadRequestValue;
  if (sigqueue(daemon, SIGHUP, value) != 0) {
    const int error = errno;
    if (error == ESRCH) {
      return absl::NotFoundError(fmt::format("kpathd (pid {}) is not running", daemon));
    }
    return absl::Status(absl::ErrnoToStatusCode(error),
                        fmt::format("SIGHUP to pid {}: {}", daemon, std::strerror(error)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(fmt::format(
          "kpathd (pid {}) did not answer the reload within {}: whether the new configuration "
          "is in force is unknown; see its log",
          daemon, absl::FormatDuration(timeout)));
    }
    // In slices: a daemon that dies meanwhile is noticed.
    const timespec slice = absl::ToTimespec(std::min(left, absl::Milliseconds(500)));
    siginfo_t info{};
    const int sig = sigtimedwait(&answers, &info, &slice);
    if (sig < 0) {
      if (kill(daemon, 0) != 0 && errno == ESRCH) {
        return absl::NotFoundError(
            fmt::format("kpathd (pid {}) exited before answering the reload", daemon));
      }
      continue;  // EAGAIN (the slice ended) or EINTR
    }
    if (info.si_pid != daemon || !IsFromReloader(info)) continue;  // not the answer
    if (sig == SIGUSR1) return absl::OkStatus();
    return absl::FailedPreconditionError(fmt::format(
        "kpathd (pid {}) refused the configuration; the running one stays in force (its log "
        "says why)",
        daemon));
  }
}

}  // namespace kpath
