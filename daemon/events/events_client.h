// `kpathd events`: reads a running kpathd's /events (format=lines) over HTTP or HTTPS (OpenSSL,
// which kpathd links for its own TLS) and prints each event, oldest first; --follow asks again
// every second for what followed the last one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
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
  bool tls = false;           // https://
};
// http[s]://[USER:PASSWORD@]HOST[:PORT][/]; HOST may be [v6].
absl::StatusOr<EventsUrl> ParseEventsUrl(std::string_view url);

// How an https:// client checks kpathd and shows itself (the web configuration's
// tls_server_config and client_auth_type, docs/securing-metrics.md).
struct EventsTls {
  std::string ca_file;    // PEM CAs to verify the server with; empty: the system's
  bool insecure = false;  // no verification of the server's certificate (curl -k)
  std::string cert_file;  // PEM client certificate (chain), with key_file; empty: none
  std::string key_file;
  // ca_file is the server's own certificate (chain), as its configuration names it: trusted as
  // the anchor itself (X509_V_FLAG_PARTIAL_CHAIN) whatever host name it holds, since a client on
  // the node reaches it at 127.0.0.1 while its certificate names the node.
  bool pinned = false;
};

// "Basic ..." for `login` and `password` of `host` in a netrc file (curl's and ftp's format:
// "machine HOST login USER password PASSWORD", or "default login ..."); empty when it has none.
absl::StatusOr<std::string> NetrcAuthorization(std::string_view netrc_text, std::string_view host);
// The default: the port of `listen_address`, at its host, or at 127.0.0.1 (::1) when that is
// 0.0.0.0 ([::]) or empty.
EventsUrl DefaultEventsUrl(const std::string& listen_address);

struct HttpReply {
  int status = 0;
  std::string body;
};
// GET `path` (with its query) over HTTP/1.0, in TLS for an https:// `url`; an error when the
// server cannot be reached, its certificate is not trusted (and not `tls.insecure`), or it does
// not answer within `timeout`.
absl::StatusOr<HttpReply> HttpGet(const EventsUrl& url, const std::string& path,
                                  std::chrono::milliseconds timeout, const EventsTls& tls = {});

// True for HttpGet's and ReadEvents' error when nothing listens where `url` points (no kpathd
// there), as opposed to a kpathd that answered and refused (HTTP 401, a TLS handshake failure).
bool NothingListening(const absl::Status& status);

// One reply of GET /events?format=lines: its header line and its event lines.
struct EventsPage {
  std::string header;
  std::string lines;  // one event a line, oldest first
};
// Reads /events?format=lines (`since`: empty for every event kept; `kind`: empty for all) a
// reply at a time, passing each to `page`, and reads on with since=<next_since> while a reply
// says "more", at most `max_replies` replies, and never past the newest event the first reply
// named (so that it ends while events keep coming). Returns the last reply's next_since. An
// error when kpathd cannot be reached or answers other than 200 ("HTTP 401: Unauthorized").
absl::StatusOr<std::string> ReadEvents(
    const EventsUrl& url, const EventsTls& tls, std::string_view since, std::string_view kind,
    const std::function<void(const EventsPage&)>& page, size_t max_replies = SIZE_MAX,
    std::chrono::milliseconds timeout = std::chrono::seconds(10));

// The kpathd a client command reads events from (`kpathd events`, and `kpathd diagnose` for the
// running kpathd's events), and how: --url, else where the configuration says kpathd listens
// (over https, its own certificate pinned, when its web configuration has TLS); then the
// command line's --ca-file, --insecure, --cert/--key and --user or --netrc-file. An error,
// worded for the person at the terminal, for options that do not go together, an unreadable
// netrc file, or a configuration whose web server asks for a client certificate not given.
struct EventsTarget {
  EventsUrl url;
  EventsTls tls;
  // Appended to an "HTTP 401" from a kpathd whose web configuration asks for basic auth when
  // none was given: " (FILE asks for basic auth: --user USER:PASSWORD or --netrc-file FILE)".
  std::string auth_hint;
  // An error of a request to this target, as a message: with auth_hint for an HTTP 401.
  std::string Explain(const absl::Status& error) const;
};
absl::StatusOr<EventsTarget> ResolveEventsTarget(const CliOptions& cli, const Config& config);

// Runs the subcommand; returns the exit status.
int RunEventsCommand(const CliOptions& cli, const Config& config);

}  // namespace kpath
