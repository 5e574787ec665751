// `systemctl reload kpathd` that returns when the reload is done, and fails when it is refused
// (systemd 252 has no Type=notify-reload). The unit's ExecReload= runs
// `kpathd --config FILE --reload $MAINPID`, the client side: it checks FILE as --check-config
// does, queues SIGHUP to the daemon with kReloadRequestValue (sigqueue(3)), and waits for the
// answer. The daemon answers only such a queued SIGHUP, to its sender: SIGUSR1 once the new
// configuration is in force (applied by the sampling loop), SIGUSR2 when it refused it (the
// reason is in its log). A plain `kill -HUP` reloads as before and gets no answer: its sender
// may not expect a signal, and SIGUSR1 would kill it.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kpath {

// "kpRL": what a reload request and its answer carry in si_value.
inline constexpr int kReloadRequestValue = 0x6b70524c;

// Whether `info` (from sigwaitinfo) is a SIGHUP queued by a reload client, which waits for an
// answer.
bool IsReloadRequest(const siginfo_t& info);

// The daemon's answer to the client `requester`: the configuration is in force (`applied`) or
// was refused.
void AnswerReloadRequest(pid_t requester, bool applied);

// The client: asks `daemon` to reload and waits up to `timeout` for its answer. OK when it is in
// force; FailedPrecondition when refused, NotFound when `daemon` is not running,
// DeadlineExceeded without an answer in time (each with a message that says so).
absl::Status RequestReload(pid_t daemon, absl::Duration timeout);

}  // namespace kpath
