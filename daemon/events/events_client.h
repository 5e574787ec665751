// `kpathd events`: reads a running kpathd's /events (format=lines) over HTTP and prints each
// event, oldest first; --follow asks again every second for what followed the last one.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/cli.h"
#include "daemon/config.h"

namespace kpath {

struct EventsUrl {
  std::string host;
  int port = 9477;
  std::string authorization;  // "Basic ..." from user:password@, or empty
};
// http://[USER:PASSWORD@]HOST[:PORT][/]; HOST may be [v6]. https is refused (not supported by
// the client yet: use curl against /events).
absl::StatusOr<EventsUrl> ParseEventsUrl(std::string_view url);
// The default: 127.0.0.1 and the port of `listen_address`.
EventsUrl DefaultEventsUrl(const std::string& listen_address);

struct HttpReply {
  int status = 0;
  std::string body;
};
// GET `path` (with its query) over HTTP/1.0; an error when the server cannot be reached or does
// not answer within `timeout`.
absl::StatusOr<HttpReply> HttpGet(const EventsUrl& url, const std::string& path,
                                  std::chrono::milliseconds timeout);

// Runs the subcommand; returns the exit status.
int RunEventsCommand(const CliOptions& cli, const Config& config);

}  // namespace kpath
