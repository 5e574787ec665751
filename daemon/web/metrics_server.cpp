#include "daemon/web/metrics_server.h"

#include <CivetServer.h>
#include <netdb.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/events/events_query.h"
#include "daemon/web/thread_stack.h"
#include "fmt/format.h"
#include "prometheus/exposer.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

// A scrape is a GET with a few headers (Authorization among them). 16 KiB leaves room for what
// proxies add; civetweb refuses a larger request (1.15 answers 400) before any handler runs.
constexpr int kMaxRequestBytes = 16384;

// civetweb's own error messages (a TLS handshake that failed, a client that timed out): debug,
// since any client on the network can cause them.
int LogCivetwebMessage(const mg_connection*, const char* message) {
  spdlog::debug("civetweb: {}", message);
  return 1;
}

// Idle kept-alive connections never take more than half of civetweb's threads, so that the other
// half serves new connections as without keep-alive: it still takes that many idle or slow
// clients to delay a scrape, by request_timeout at most. civetweb 1.15 has no such limit (a
// kept-alive connection holds its thread until keep_alive_timeout_ms), so kpathd counts the
// connections being served (init_connection ... connection_close) and, when a request arrives
// while more than half of the threads are taken, has civetweb close its connection after the
// response, as if the client had sent "Connection: close". One server per process.
struct KeepAliveGate {
  std::atomic<int> open{0};   // connections on a thread: being served or kept alive
  std::atomic<int> limit{0};  // at most this many open for a connection to be kept alive
};
KeepAliveGate keep_alive_gate;

int CountConnection(const mg_connection*, void**) {
  keep_alive_gate.open.fetch_add(1);
  return 0;
}

// The server whose health endpoints begin_request answers (one server per process, as above).
std::atomic<const MetricsServer*> health_server{nullptr};

int CloseWhenBusy(mg_connection* conn) {
  if (keep_alive_gate.open.load() <= keep_alive_gate.limit.load()) return 0;
  // The request's headers live in the connection (not const there): a Connection header,
  // replaced or added, is what civetweb's should_keep_alive() reads after the response.
  auto* request = const_cast<mg_request_info*>(mg_get_request_info(conn));
  static constexpr char kConnection[] = "Connection";
  static constexpr char kClose[] = "close";
  for (int i = 0; i < request->num_headers; ++i) {
    if (strcasecmp(request->http_headers[i].name, kConnection) == 0) {
      request->http_headers[i].value = kClose;
      return 0;
    }
  }
  if (request->num_headers < MG_MAX_HEADERS) {
    request->http_headers[request->num_headers++] = {kConnection, kClose};
  }
  return 0;  // 0: civetweb goes on and serves the request
}

// /-/healthy, /-/ready and /events, answered before civetweb looks for a handler
// (prometheus-cpp's Exposer registers only /metrics and keeps its CivetServer to itself). Returns
// the status sent, or 0 for every other path.
int AnswerOwnEndpoint(mg_connection* conn) {
  const MetricsServer* server = health_server.load();
  const mg_request_info* request = mg_get_request_info(conn);
  if (server == nullptr || request->local_uri == nullptr || request->request_method == nullptr) {
    return 0;
  }
  const std::string_view method = request->request_method;
  std::optional<HealthReply> reply = server->ReplyFor(
      request->local_uri, method, request->query_string, mg_get_header(conn, "Authorization"));
  if (!reply) return 0;
  const std::string length = std::to_string(reply->body.size());
  mg_response_header_start(conn, reply->status);
  mg_response_header_add(conn, "Content-Type", reply->content_type.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  if (reply->challenge) {
    mg_response_header_add(conn, "WWW-Authenticate", "Basic realm=\"kpathd\"", -1);
  }
  if (reply->status == 405) mg_response_header_add(conn, "Allow", "GET, HEAD", -1);
  mg_response_header_send(conn);
  if (method != "HEAD") mg_write(conn, reply->body.data(), reply->body.size());
  return reply->status;
}

int BeginRequest(mg_connection* conn) {
  CloseWhenBusy(conn);
  return AnswerOwnEndpoint(conn);
}

// Called on the worker thread as civetweb closes each connection, with the request's deep calls
// returned: without it each of web.max_connections workers that ever served a scrape keeps that
// scrape's stack pages (~20 KiB) resident for the life of the daemon (bench/README.md, "Memory").
void ReleaseWorkerStack(const mg_connection*) {
  keep_alive_gate.open.fetch_sub(1);
  ReleaseStackBelowCaller();
}

// civetweb's master thread notices a stop only when its poll() on the listening socket returns,
// which can take its whole timeout quantum (2 s). Connecting to our own port wakes it at once.
void StopExposer(std::unique_ptr<prometheus::Exposer> exposer, const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "[::]") host = "::1";
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  std::vector<int> ports = exposer->GetListeningPorts();
  std::atomic<bool> stopped{false};
  std::thread waker([&] {
    while (!stopped.load()) {
      for (int port : ports) {
        addrinfo hints{};
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
        addrinfo* res = nullptr;
        if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) continue;
        int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
          connect(fd, res->ai_addr, res->ai_addrlen);
          close(fd);
        }
        freeaddrinfo(res);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer.reset();
  stopped.store(true);
  waker.join();
}

}  // namespace

std::string WebSecurity::Summary() const {
  std::string out = "plain HTTP";
  if (tls) {
    const TlsServerConfig& c = tls->config();
    out = fmt::format("TLS ({} to {}, client certificates: {}; certificate {})",
                      TlsVersionName(c.min_version), TlsVersionName(c.max_version),
                      ClientAuthName(c.client_auth), tls->summary());
  }
  if (!users) return absl::StrCat(out, ", no authentication");
  return absl::StrCat(out, ", basic auth (", users->users(),
                      users->users() == 1 ? " user)" : " users)");
}

absl::StatusOr<WebSecurity> LoadWebSecurity(const WebServerConfig& web) {
  WebSecurity security;
  if (web.config_file.empty()) return security;
  absl::StatusOr<WebConfig> file = LoadWebConfigFile(web.config_file);
  if (!file.ok()) return file.status();
  security.file = *std::move(file);
  if (security.file.tls) {
    absl::StatusOr<std::shared_ptr<const TlsCredentials>> tls =
        TlsCredentials::Load(*security.file.tls);
    if (!tls.ok()) return tls.status();
    security.tls = *std::move(tls);
  }
  if (!security.file.basic_auth_users.empty()) {
    absl::StatusOr<std::unique_ptr<BasicAuthUsers>> users =
        BasicAuthUsers::Create(security.file.basic_auth_users);
    if (!users.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(web.config_file, ": ", users.status().message()));
    }
    security.users = *std::move(users);
  }
  return security;
}

std::vector<std::string> CivetwebOptions(const std::string& listen_address,
                                         const WebServerConfig& web, bool tls) {
  return {
      // A trailing "s": TLS on this port.
      "listening_ports", tls ? listen_address + "s" : listen_address,
      // One thread per connection being served, idle or slow ones included.
      "num_threads", std::to_string(web.max_connections),
      // Connections accepted while every thread is busy wait here, in order, for the next one.
      "connection_queue", std::to_string(web.max_connections),
      // The request with its headers, each write of the response, and the TLS handshake.
      "request_timeout_ms", std::to_string(absl::ToInt64Milliseconds(web.request_timeout)),
      // A kept-alive connection holds its thread until the next request or the timeout; it is
      // kept alive only while no more than half of the threads are taken (KeepAliveGate).
      "enable_keep_alive", web.keep_alive_timeout > absl::ZeroDuration() ? "yes" : "no",
      "keep_alive_timeout_ms", std::to_string(absl::ToInt64Milliseconds(web.keep_alive_timeout)),
      "max_request_size", std::to_string(kMaxRequestBytes),
      // No document_root: civetweb serves no file (CVE-2025-55763 is in its URI handling).
  };
}

MetricsServer::MetricsServer(std::string listen_address, WebSecurity security)
    : listen_address_(std::move(listen_address)),
      tls_on_(security.tls != nullptr),
      security_(std::move(security)) {}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen_address, const WebServerConfig& web,
    const std::weak_ptr<prometheus::Collectable>& collectable, ReadinessCheck readiness,
    const EventRing* events) {
  absl::StatusOr<WebSecurity> security = LoadWebSecurity(web);
  if (!security.ok()) return security.status();
  if (security->tls) {
    if (absl::Status s = TlsServerContext::CheckCivetwebCanServeTls(); !s.ok()) return s;
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer(listen_address, *std::move(security)));
  server->readiness_ = std::move(readiness);
  server->events_ = events;
  CivetCallbacks callbacks;
  callbacks.log_message = LogCivetwebMessage;
  callbacks.init_connection = CountConnection;
  callbacks.begin_request = BeginRequest;
  callbacks.connection_close = ReleaseWorkerStack;
  keep_alive_gate.limit.store(web.max_connections / 2);
  if (server->tls_on_) {
    server->tls_ = std::make_unique<TlsServerContext>(server->security_.tls);
    server->tls_->Install();
    callbacks.external_ssl_ctx = TlsServerContext::ExternalSslContext;
  }
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(
        CivetwebOptions(listen_address, web, server->tls_on_), &callbacks);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen_address, ": ", e.what(),
                                               " (address in use, or not an address of this "
                                               "host?)"));
  }
  server->exposer_->RegisterCollectable(collectable, "/metrics");
  health_server.store(server.get());
  if (server->Users()) server->RequireAuthentication();
  if (server->Users() && !server->tls_on_) {
    spdlog::warn("basic auth without TLS: passwords cross the network in clear text");
  }
  return server;
}

MetricsServer::~MetricsServer() {
  if (exposer_) StopExposer(std::move(exposer_), listen_address_);
  const MetricsServer* self = this;
  health_server.compare_exchange_strong(self, nullptr);
}

std::optional<HealthReply> MetricsServer::ReplyFor(std::string_view path, std::string_view method,
                                                   const char* query,
                                                   const char* authorization) const {
  const bool events = path == "/events" && events_ != nullptr;
  if (path != "/-/healthy" && path != "/-/ready" && !events) return std::nullopt;
  // The same users as /metrics: the exporter-toolkit protects every path, health ones included.
  bool authorized = true;
  if (std::shared_ptr<BasicAuthUsers> users = Users()) {
    std::optional<BasicCredentials> credentials =
        authorization ? ParseBasicAuthorization(authorization) : std::nullopt;
    authorized = credentials && users->Check(credentials->user, credentials->password);
  }
  if (events) return EventsEndpointReply(*events_, method, query ? query : "", authorized);
  return HealthEndpointReply(path, method, authorized, readiness_);
}

std::shared_ptr<BasicAuthUsers> MetricsServer::Users() const {
  absl::MutexLock lock(&mu_);
  return security_.users;
}

void MetricsServer::RequireAuthentication() {
  // prometheus-cpp answers 401 with WWW-Authenticate itself when this returns false.
  exposer_->RegisterAuth(
      [this](const std::string& user, const std::string& password) {
        std::shared_ptr<BasicAuthUsers> users = Users();
        return users && users->Check(user, password);
      },
      "kpathd", "/metrics");
  auth_registered_ = true;
}

absl::Status MetricsServer::Reload(const WebServerConfig& web) {
  absl::StatusOr<WebSecurity> next = LoadWebSecurity(web);
  if (!next.ok()) return next.status();
  if (Apply(*std::move(next))) RequireAuthentication();
  return absl::OkStatus();
}

bool MetricsServer::Apply(WebSecurity next) {
  absl::MutexLock lock(&mu_);
  if (next.tls && !tls_on_) {
    spdlog::warn("SIGHUP: TLS takes effect on restart; /metrics stays plain HTTP until then");
    next.tls = nullptr;
    next.file.tls.reset();
  } else if (!next.tls && tls_on_) {
    spdlog::warn("SIGHUP: plain HTTP takes effect on restart; the previous TLS settings stay");
    next.tls = security_.tls;
    next.file.tls = security_.file.tls;
  }
  if (tls_) tls_->Use(next.tls);
  if (!next.users && security_.users) {
    spdlog::warn(
        "SIGHUP: turning basic auth off takes effect on restart; the previous users "
        "stay until then");
    next.users = security_.users;
    next.file.basic_auth_users = security_.file.basic_auth_users;
  } else if (next.users && security_.users &&
             next.file.basic_auth_users == security_.file.basic_auth_users) {
    next.users = security_.users;  // the same users: keep the verified credentials cached
  }
  const bool newly_required = next.users && !auth_registered_;
  security_ = std::move(next);
  return newly_required;
}

std::string MetricsServer::Url() const {
  return absl::StrCat(tls_on_ ? "https://" : "http://", listen_address_, "/metrics");
}

std::string MetricsServer::SecuritySummary() const {
  absl::MutexLock lock(&mu_);
  return security_.Summary();
}

}  // namespace kpath
