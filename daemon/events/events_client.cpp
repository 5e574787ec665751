#include "daemon/events/events_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "daemon/events/event_json.h"
#include "daemon/events/events_query.h"
#include "fmt/format.h"

namespace kpath {
namespace {

int PortOf(const std::string& listen_address, int fallback) {
  int port = 0;
  const size_t colon = listen_address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(listen_address.substr(colon + 1), &port)) {
    return fallback;
  }
  return port;
}

std::string PercentEncode(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
        c == '~' || c == ':' || c == '@') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<EventsUrl> ParseEventsUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        fmt::format("--url \"{}\": {} (http://[USER:PASSWORD@]HOST[:PORT])", url, why));
  };
  constexpr std::string_view kScheme = "http://";
  if (url.starts_with("https://")) {
    return bad("https is not supported by kpathd events; use curl --cacert ... on /events");
  }
  if (!url.starts_with(kScheme)) return bad("not an http:// URL");
  std::string_view rest = url.substr(kScheme.size());
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    if (rest.substr(slash) != "/") return bad("no path: /events is added");
    rest = rest.substr(0, slash);
  }
  EventsUrl out;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string credentials(rest.substr(0, at));
    out.authorization = "Basic " + absl::Base64Escape(credentials);
    rest = rest.substr(at + 1);
  }
  std::string_view port_text;
  if (rest.starts_with("[")) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed [");
    out.host = std::string(rest.substr(1, close - 1));
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return bad("junk after ]");
      port_text = rest.substr(close + 2);
    }
  } else if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    out.host = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
  } else {
    out.host = std::string(rest);
  }
  if (out.host.empty()) return bad("no host");
  if (!port_text.empty() &&
      (!absl::SimpleAtoi(std::string(port_text), &out.port) || out.port < 1 || out.port > 65535)) {
    return bad("port is not a number from 1 to 65535");
  }
  return out;
}

EventsUrl DefaultEventsUrl(const std::string& listen_address) {
  EventsUrl url;
  url.host = "127.0.0.1";
  url.port = PortOf(listen_address, 9477);
  return url;
}

absl::StatusOr<HttpReply> HttpGet(const EventsUrl& url, const std::string& path,
                                  std::chrono::milliseconds timeout) {
  const std::string where = fmt::format("{}:{}", url.host, url.port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &res);
      rc != 0) {
    return absl::UnavailableError(fmt::format("{}: {}", where, gai_strerror(rc)));
  }
  int fd = -1;
  int error = 0;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError(fmt::format("cannot connect to {}: {} (is kpathd running there?)",
                                              where, std::strerror(error)));
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string request = fmt::format("GET {} HTTP/1.0\r\nHost: {}\r\n", path, where);
  if (!url.authorization.empty()) request += "Authorization: " + url.authorization + "\r\n";
  request += "\r\n";
  std::string response;
  bool ok = send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size());
  char buf[16384];
  while (ok) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      ok = errno == EINTR;
      continue;
    }
    response.append(buf, static_cast<size_t>(n));
  }
  error = errno;
  close(fd);
  if (!ok) {
    return absl::UnavailableError(fmt::format("{}: {}", where, std::strerror(error)));
  }
  const size_t end = response.find("\r\n\r\n");
  int status = 0;
  if (end == std::string::npos || std::sscanf(response.c_str(), "HTTP/%*s %d", &status) != 1) {
    return absl::UnavailableError(fmt::format("{}: not an HTTP response", where));
  }
  return HttpReply{status, response.substr(end + 4)};
}

int RunEventsCommand(const CliOptions& cli, const Config& config) {
  auto fail = [](std::string_view message) {
    std::fprintf(stderr, "kpathd events: %.*s\n", static_cast<int>(message.size()), message.data());
    return 1;
  };
  EventsUrl url = DefaultEventsUrl(config.listen_address);
  if (cli.events_url) {
    absl::StatusOr<EventsUrl> parsed = ParseEventsUrl(*cli.events_url);
    if (!parsed.ok()) return fail(std::string(parsed.status().message()));
    url = *parsed;
  }
  std::string query;
  if (cli.events_since) {
    EventsQuery check;
    if (absl::Status s = ParseSince(*cli.events_since, absl::Now(), check); !s.ok()) {
      return fail(std::string(s.message()));
    }
    query += "&since=" + PercentEncode(*cli.events_since);
  }
  if (cli.events_kind) query += "&kind=" + PercentEncode(*cli.events_kind);
  for (;;) {
    absl::StatusOr<HttpReply> reply =
        HttpGet(url, "/events?format=lines" + query, std::chrono::seconds(10));
    if (!reply.ok()) return fail(std::string(reply.status().message()));
    if (reply->status != 200) {
      std::string body = reply->body;
      while (!body.empty() && body.back() == '\n') body.pop_back();
      return fail(fmt::format("HTTP {}: {}", reply->status, body));
    }
    std::string_view body = reply->body;
    const size_t eol = body.find('\n');
    const std::string_view header = body.substr(0, eol);
    if (JsonField(header, "restarted") == "true") {
      std::fprintf(stderr, "kpathd events: kpathd restarted; reading from its first event\n");
    }
    if (std::optional<std::string> missed = JsonField(header, "missed"); missed && *missed != "0") {
      std::fprintf(stderr,
                   "kpathd events: %s events missed: dropped from kpathd's ring before "
                   "they were read (the journal has them)\n",
                   JsonField(header, "missed_count_known") == "true" ? missed->c_str() : "some");
    }
    body.remove_prefix(eol == std::string_view::npos ? body.size() : eol + 1);
    while (!body.empty()) {
      const size_t end = body.find('\n');
      const std::string_view line = body.substr(0, end);
      body.remove_prefix(end == std::string_view::npos ? body.size() : end + 1);
      if (line.empty()) continue;
      if (cli.events_json) {
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fputc('\n', stdout);
      } else {
        std::printf("%s %s %s\n", JsonField(line, "time").value_or("?").c_str(),
                    JsonField(line, "kind").value_or("?").c_str(),
                    JsonField(line, "message").value_or("").c_str());
      }
    }
    std::fflush(stdout);
    if (!cli.events_follow) return 0;
    std::optional<std::string> next = JsonField(header, "next_since");
    if (!next) return fail("the reply names no next_since");
    std::string kind = cli.events_kind ? "&kind=" + PercentEncode(*cli.events_kind) : "";
    query = "&since=" + *next + kind;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace kpath
