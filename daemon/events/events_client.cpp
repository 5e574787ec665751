#include "daemon/events/events_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "daemon/events/daemon_endpoint.h"
#include "daemon/events/event_json.h"
#include "daemon/events/events_query.h"
#include "fmt/format.h"

namespace kpath {

namespace {
// The payload HttpGet puts on its error when nothing listens (the connect was refused or
// unreachable), read by NothingListening: the error's kind, not its wording.
constexpr char kNothingListening[] = "kpathd/events-client/nothing-listening";
}  // namespace

bool NothingListening(const absl::Status& status) {
  return status.GetPayload(kNothingListening).has_value();
}
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

// The reasons OpenSSL queued, oldest first, and the queue emptied.
std::string OpensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    if (!out.empty()) out += "; ";
    // "error:0A000086:SSL routines::certificate verify failed": the reason is the last part.
    std::string_view t = text;
    const size_t colon = t.rfind(':');
    out += colon == std::string_view::npos ? t : t.substr(colon + 1);
  }
  return out.empty() ? "unknown TLS error" : out;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// One TLS connection over a connected socket, owned (the socket stays the caller's).
class TlsConnection {
 public:
  static absl::StatusOr<std::unique_ptr<TlsConnection>> Open(int fd, const EventsUrl& url,
                                                             const EventsTls& tls,
                                                             const std::string& where) {
    ERR_clear_error();
    auto c = std::unique_ptr<TlsConnection>(new TlsConnection());
    c->ctx_ = SSL_CTX_new(TLS_client_method());
    if (c->ctx_ == nullptr) return absl::InternalError("TLS: " + OpensslErrors());
    SSL_CTX_set_min_proto_version(c->ctx_, TLS1_2_VERSION);
    if (tls.insecure) {
      SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_NONE, nullptr);
    } else {
      SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
      const int loaded = tls.ca_file.empty()
                             ? SSL_CTX_set_default_verify_paths(c->ctx_)
                             : SSL_CTX_load_verify_locations(c->ctx_, tls.ca_file.c_str(), nullptr);
      if (loaded != 1) {
        return absl::InvalidArgumentError(
            fmt::format("--ca-file {}: {}", tls.ca_file, OpensslErrors()));
      }
    }
    if (!tls.cert_file.empty()) {
      if (SSL_CTX_use_certificate_chain_file(c->ctx_, tls.cert_file.c_str()) != 1) {
        return absl::InvalidArgumentError(
            fmt::format("--cert {}: {}", tls.cert_file, OpensslErrors()));
      }
      if (SSL_CTX_use_PrivateKey_file(c->ctx_, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
          SSL_CTX_check_private_key(c->ctx_) != 1) {
        return absl::InvalidArgumentError(
            fmt::format("--key {}: {}", tls.key_file, OpensslErrors()));
      }
    }
    c->ssl_ = SSL_new(c->ctx_);
    if (c->ssl_ == nullptr || SSL_set_fd(c->ssl_, fd) != 1) {
      return absl::InternalError("TLS: " + OpensslErrors());
    }
    // The certificate must name the host the URL names: an IP address in its IP SANs, a name in
    // its DNS SANs (and sent as SNI); unless it is the one pinned, whatever it names.
    if (tls.pinned) {
      X509_VERIFY_PARAM_set_flags(SSL_get0_param(c->ssl_), X509_V_FLAG_PARTIAL_CHAIN);
      if (!IsIpAddress(url.host)) SSL_set_tlsext_host_name(c->ssl_, url.host.c_str());
    } else if (IsIpAddress(url.host)) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl_), url.host.c_str());
    } else {
      SSL_set_tlsext_host_name(c->ssl_, url.host.c_str());
      SSL_set1_host(c->ssl_, url.host.c_str());
    }
    if (SSL_connect(c->ssl_) != 1) {
      const long verify = SSL_get_verify_result(c->ssl_);
      std::string why = OpensslErrors();
      if (verify != X509_V_OK) {
        why = fmt::format("{} ({}): --ca-file FILE to trust its CA, or --insecure", why,
                          X509_verify_cert_error_string(verify));
      } else if (why.find("certificate required") != std::string::npos ||
                 why.find("handshake failure") != std::string::npos) {
        why += tls.cert_file.empty()
                   ? " (does it ask for a client certificate? --cert FILE --key FILE)"
                   : " (is --cert signed by a CA it trusts?)";
      }
      return absl::UnavailableError(fmt::format("TLS handshake with {} failed: {}", where, why));
    }
    return c;
  }
  ~TlsConnection() {
    if (ssl_ != nullptr) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  }
  bool Write(std::string_view data) {
    return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) ==
           static_cast<int>(data.size());
  }
  // Bytes read, 0 at the end of the stream (kpathd closes after an HTTP/1.0 reply, with or
  // without a close_notify), -1 on an error (`error` says which).
  ssize_t Read(char* buf, size_t size, std::string& error) {
    const int n = SSL_read(ssl_, buf, static_cast<int>(size));
    if (n > 0) return n;
    const int code = SSL_get_error(ssl_, n);
    if (code == SSL_ERROR_ZERO_RETURN) return 0;
    if (code == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && (n == 0 || errno == 0)) return 0;
    error = code == SSL_ERROR_SYSCALL ? std::strerror(errno) : OpensslErrors();
    if (error.find("certificate required") != std::string::npos) {
      error += " (kpathd asks for a client certificate: --cert FILE --key FILE)";
    }
    return -1;
  }

 private:
  TlsConnection() = default;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

}  // namespace

absl::StatusOr<std::string> NetrcAuthorization(std::string_view netrc_text, std::string_view host) {
  // Tokens separated by white space; "machine NAME" or "default" opens an entry, "login" and
  // "password" fill it, "macdef" (ftp macros) ends the useful part.
  std::istringstream in{std::string(netrc_text)};
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  bool in_entry = false, matched = false;
  std::string login, password;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    const bool has_value = i + 1 < tokens.size();
    if (t == "machine" || t == "default" || t == "macdef") {
      if (matched) break;  // the first matching entry wins
      in_entry = t == "default" || (t == "machine" && has_value && tokens[i + 1] == host);
      matched = in_entry;
      if (t == "machine") ++i;
      if (t == "macdef") break;
    } else if ((t == "login" || t == "password" || t == "account") && has_value) {
      if (in_entry) (t == "login" ? login : t == "password" ? password : login) = tokens[i + 1];
      ++i;
    }
  }
  if (!matched) return std::string();
  if (login.empty()) {
    return absl::InvalidArgumentError(fmt::format("the entry for {} has no login", host));
  }
  return "Basic " + absl::Base64Escape(login + ":" + password);
}

absl::StatusOr<EventsUrl> ParseEventsUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        fmt::format("--url \"{}\": {} (http[s]://[USER:PASSWORD@]HOST[:PORT])", url, why));
  };
  EventsUrl out;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
    out.tls = true;
  } else {
    return bad("not an http:// or https:// URL");
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    if (rest.substr(slash) != "/") return bad("no path: /events is added");
    rest = rest.substr(0, slash);
  }
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
  const size_t colon = listen_address.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen_address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  url.host = host.empty() || host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host;
  url.port = PortOf(listen_address, 9477);
  return url;
}

absl::StatusOr<HttpReply> HttpGet(const EventsUrl& url, const std::string& path,
                                  std::chrono::milliseconds timeout, const EventsTls& tls) {
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
    absl::Status none = absl::UnavailableError(fmt::format(
        "cannot connect to {}: {} (is kpathd running there?)", where, std::strerror(error)));
    none.SetPayload(kNothingListening, absl::Cord());
    return none;
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string request = fmt::format("GET {} HTTP/1.0\r\nHost: {}\r\n", path, where);
  if (!url.authorization.empty()) request += "Authorization: " + url.authorization + "\r\n";
  request += "\r\n";
  std::unique_ptr<TlsConnection> connection;
  if (url.tls) {
    absl::StatusOr<std::unique_ptr<TlsConnection>> opened =
        TlsConnection::Open(fd, url, tls, where);
    if (!opened.ok()) {
      close(fd);
      return opened.status();
    }
    connection = std::move(*opened);
  }
  std::string response;
  std::string failure;
  bool ok = connection ? connection->Write(request)
                       : send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
                             static_cast<ssize_t>(request.size());
  if (!ok && connection) {
    // In TLS 1.3 the server judges a client certificate after the handshake: its alert ("tlsv13
    // alert certificate required") is read after a write that may already find it gone.
    failure = std::strerror(errno);
    char byte;
    std::string alert;
    if (connection->Read(&byte, 1, alert) < 0 && !alert.empty()) failure = alert;
    if (failure.find("client certificate") == std::string::npos &&
        failure.find("certificate") != std::string::npos) {
      failure += tls.cert_file.empty()
                     ? " (does kpathd ask for a client certificate? --cert FILE --key FILE)"
                     : " (is --cert signed by a CA kpathd trusts?)";
    }
  } else if (!ok) {
    failure = std::strerror(errno);
  }
  char buf[16384];
  while (ok) {
    const ssize_t n =
        connection ? connection->Read(buf, sizeof(buf), failure) : read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (!connection && errno == EINTR) continue;
      if (!connection) failure = std::strerror(errno);
      ok = false;
      continue;
    }
    response.append(buf, static_cast<size_t>(n));
  }
  connection.reset();
  close(fd);
  if (!ok) return absl::UnavailableError(fmt::format("{}: {}", where, failure));
  const size_t end = response.find("\r\n\r\n");
  int status = 0;
  if (end == std::string::npos || std::sscanf(response.c_str(), "HTTP/%*s %d", &status) != 1) {
    return absl::UnavailableError(fmt::format("{}: not an HTTP response", where));
  }
  return HttpReply{status, response.substr(end + 4)};
}

absl::StatusOr<std::string> ReadEvents(const EventsUrl& url, const EventsTls& tls,
                                       std::string_view since, std::string_view kind,
                                       const std::function<void(const EventsPage&)>& page,
                                       size_t max_replies, std::chrono::milliseconds timeout) {
  const std::string kind_query = kind.empty() ? "" : "&kind=" + PercentEncode(kind);
  std::string next(since);
  uint64_t newest = 0;  // the last_seq of the first reply
  for (size_t replies = 0; replies < max_replies; ++replies) {
    const std::string since_query = next.empty() ? "" : "&since=" + PercentEncode(next);
    absl::StatusOr<HttpReply> reply =
        HttpGet(url, "/events?format=lines" + since_query + kind_query, timeout, tls);
    if (!reply.ok()) return reply.status();
    if (reply->status != 200) {
      std::string body = reply->body;
      while (!body.empty() && body.back() == '\n') body.pop_back();
      return absl::UnavailableError(fmt::format("HTTP {}: {}", reply->status, body));
    }
    const size_t eol = reply->body.find('\n');
    EventsPage got;
    got.header = reply->body.substr(0, eol);
    if (eol != std::string::npos) got.lines = reply->body.substr(eol + 1);
    std::optional<std::string> next_since = JsonField(got.header, "next_since");
    uint64_t next_seq = 0;
    if (!next_since || !absl::SimpleAtoi(*next_since, &next_seq)) {
      return absl::UnavailableError("the reply names no next_since");
    }
    page(got);
    next = *next_since;
    if (replies == 0) absl::SimpleAtoi(JsonField(got.header, "last_seq").value_or("0"), &newest);
    if (JsonField(got.header, "more") != "true" || next_seq >= newest) break;
  }
  return next;
}

std::string EventsTarget::Explain(const absl::Status& error) const {
  std::string message(error.message());
  if (message.starts_with("HTTP 401") && url.authorization.empty()) message += auth_hint;
  return message;
}

absl::StatusOr<EventsTarget> ResolveEventsTarget(const CliOptions& cli, const Config& config) {
  auto refuse = [](std::string message) { return absl::InvalidArgumentError(std::move(message)); };
  EventsTarget t;
  if (cli.events_url) {
    absl::StatusOr<EventsUrl> parsed = ParseEventsUrl(*cli.events_url);
    if (!parsed.ok()) return parsed.status();
    t.url = *parsed;
  } else {
    absl::StatusOr<DaemonEndpoint> endpoint = DaemonEndpointFor(config.listen_address, config.web);
    if (!endpoint.ok()) {
      return refuse(fmt::format("{} (or --url URL)", std::string(endpoint.status().message())));
    }
    if (endpoint->client_cert_required && !cli.events_cert) {
      return refuse(fmt::format("{} asks for a client certificate: --cert FILE --key FILE",
                                endpoint->web_config_file));
    }
    t.url = endpoint->url;
    t.tls = endpoint->tls;
    if (endpoint->basic_auth) {
      t.auth_hint =
          fmt::format(" ({} asks for basic auth: --user USER:PASSWORD or --netrc-file FILE)",
                      endpoint->web_config_file);
    }
  }
  if (cli.events_ca_file) {
    t.tls = EventsTls();  // not kpathd's own certificate, pinned: the CAs given
    t.tls.ca_file = *cli.events_ca_file;
  }
  t.tls.insecure = cli.events_insecure;
  t.tls.cert_file = cli.events_cert.value_or("");
  t.tls.key_file = cli.events_key.value_or("");
  if (!t.url.tls && (cli.events_ca_file || cli.events_insecure || cli.events_cert)) {
    return refuse("--ca-file, --insecure, --cert and --key go with an https:// --url");
  }
  if (cli.events_user) {
    if (cli.events_user->find(':') == std::string::npos) {
      return refuse("--user USER:PASSWORD (the password after a colon)");
    }
    t.url.authorization = "Basic " + absl::Base64Escape(*cli.events_user);
  } else if (cli.events_netrc_file && t.url.authorization.empty()) {
    std::ifstream in(*cli.events_netrc_file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      return refuse(
          fmt::format("--netrc-file {}: {}", *cli.events_netrc_file, std::strerror(errno)));
    }
    absl::StatusOr<std::string> auth = NetrcAuthorization(text.str(), t.url.host);
    if (!auth.ok()) {
      return refuse(fmt::format("--netrc-file {}: {}", *cli.events_netrc_file,
                                std::string(auth.status().message())));
    }
    t.url.authorization = *auth;
  }
  return t;
}

int RunEventsCommand(const CliOptions& cli, const Config& config) {
  // A server that closes a TLS connection (a client certificate refused) must be an error
  // message, not a SIGPIPE: OpenSSL writes with write(2), not send(MSG_NOSIGNAL).
  signal(SIGPIPE, SIG_IGN);
  auto fail = [](std::string_view message) {
    std::fprintf(stderr, "kpathd events: %.*s\n", static_cast<int>(message.size()), message.data());
    return 1;
  };
  absl::StatusOr<EventsTarget> target = ResolveEventsTarget(cli, config);
  if (!target.ok()) return fail(std::string(target.status().message()));
  const EventsUrl& url = target->url;
  const EventsTls& tls = target->tls;
  if (cli.events_since) {
    EventsQuery check;
    if (absl::Status s = ParseSince(*cli.events_since, absl::Now(), check); !s.ok()) {
      return fail(std::string(s.message()));
    }
  }
  auto print = [&](const EventsPage& page) {
    if (JsonField(page.header, "restarted") == "true") {
      std::fprintf(stderr, "kpathd events: kpathd restarted; reading from its first event\n");
    }
    if (std::optional<std::string> missed = JsonField(page.header, "missed");
        missed && *missed != "0") {
      std::fprintf(
          stderr,
          "kpathd events: %s events missed: dropped from kpathd's ring before "
          "they were read (the journal has them)\n",
          JsonField(page.header, "missed_count_known") == "true" ? missed->c_str() : "some");
    }
    std::string_view body = page.lines;
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
  };
  const std::string kind = cli.events_kind.value_or("");
  // What is there now, all of it (a reply at a time); then, following, one reply a second: a
  // follower that falls behind a storm costs kpathd at most one capped reply a second, and is
  // told how many events it missed.
  absl::StatusOr<std::string> next =
      ReadEvents(url, tls, cli.events_since.value_or(""), kind, print);
  while (next.ok() && cli.events_follow) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    next = ReadEvents(url, tls, *next, kind, print, /*max_replies=*/1);
  }
  if (!next.ok()) return fail(target->Explain(next.status()));
  return 0;
}

}  // namespace kpath
