// kpathd's /metrics endpoint: prometheus-cpp's Exposer on civetweb, with the connection limits of
// kpathd.yaml's `web:` section and the TLS and basic authentication of the web configuration
// file (web_config.h). docs/securing-metrics.md says what each civetweb option is set to, and
// why.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/web/basic_auth.h"
#include "daemon/web/health_endpoints.h"
#include "daemon/web/web_config.h"
#include "daemon/web/web_server_config.h"
#include "daemon/web/web_tls.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace kpath {

class EventRing;

// The web configuration file of a `web:` section, read, with its certificates and hashes checked.
struct WebSecurity {
  WebConfig file;
  std::shared_ptr<const TlsCredentials> tls;  // null: plain HTTP
  std::shared_ptr<BasicAuthUsers> users;      // null: no authentication
  // "TLS (TLS12 to TLS13, client certificates RequireAndVerifyClientCert), basic auth (2 users)"
  std::string Summary() const;
};
absl::StatusOr<WebSecurity> LoadWebSecurity(const WebServerConfig& web);

// civetweb's options for `listen_address` and `web` (pure; a unit test pins them).
std::vector<std::string> CivetwebOptions(const std::string& listen_address,
                                         const WebServerConfig& web, bool tls);

class MetricsServer {
 public:
  // Binds `listen_address` and serves `collectable` at /metrics, /-/healthy and /-/ready
  // (health_endpoints.h; `readiness` null: always ready) and `events` at /events
  // (events_query.h; null: 404) behind the same TLS and basic auth. `events` outlives the server.
  // Errors: InvalidArgument for the web configuration, FailedPrecondition when TLS cannot be
  // served here, Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen_address, const WebServerConfig& web,
      const std::weak_ptr<prometheus::Collectable>& collectable, ReadinessCheck readiness = {},
      const EventRing* events = nullptr);
  // Stops at once, even with civetweb's master thread asleep in poll().
  ~MetricsServer();

  // SIGHUP: re-reads the web configuration file. Users and passwords, the certificate and key,
  // client CAs, client_auth_type and TLS versions apply from the next connection. Turning TLS on
  // or off, or basic auth off, takes a restart (logged; what was in force stays). On error
  // nothing changes.
  absl::Status Reload(const WebServerConfig& web);

  // "https://127.0.0.1:9477/metrics", for the log.
  std::string Url() const;
  std::string SecuritySummary() const;

  // The reply to a request for `path` if it is a health endpoint or /events, else nullopt
  // (civetweb's thread; `query`: the query string, or null; `authorization`: the Authorization
  // header, or null).
  std::optional<HealthReply> ReplyFor(std::string_view path, std::string_view method,
                                      const char* query, const char* authorization) const;

 private:
  MetricsServer(std::string listen_address, WebSecurity security);
  std::shared_ptr<BasicAuthUsers> Users() const;
  // Puts a reloaded configuration in force; true if basic auth must now be required.
  bool Apply(WebSecurity next);
  // Registers the basic-auth check (prometheus-cpp's RegisterAuth); mu_ must not be held.
  void RequireAuthentication();

  const std::string listen_address_;
  const bool tls_on_;
  ReadinessCheck readiness_;
  const EventRing* events_ = nullptr;
  mutable absl::Mutex mu_;
  WebSecurity security_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> auth_registered_{false};
  std::unique_ptr<TlsServerContext> tls_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // last: stops before what it uses goes
};

}  // namespace kpath
