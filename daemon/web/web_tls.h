// TLS for /metrics. civetweb 1.15 loads OpenSSL at run time, under names that need kpathd's
// stand-ins with OpenSSL 3 (civetweb_openssl_names.c), and takes an SSL_CTX that kpathd builds
// through its external_ssl_ctx callback. Each connection takes the certificate, key, protocol
// versions and client-certificate policy in force when its ClientHello arrives, so a SIGHUP's
// new certificate or policy applies from the next connection, without a restart. No session is
// resumed: every scrape is verified in full against the policy of the moment.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/web/web_config.h"

struct ssl_ctx_st;
struct ssl_st;

namespace kpath {

// A tls_server_config with its files read and checked: the certificate chain, the key that
// matches it, the client CAs.
class TlsCredentials {
 public:
  static absl::StatusOr<std::shared_ptr<const TlsCredentials>> Load(const TlsServerConfig& config);
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  const TlsServerConfig& config() const { return config_; }
  // "CN=node1, expires 2026-11-30 10:00:00 UTC", for the log.
  const std::string& summary() const { return summary_; }
  // Applies them to one connection, from the ClientHello callback.
  bool ApplyTo(ssl_st* ssl) const;

 private:
  struct Material;
  TlsCredentials(TlsServerConfig config, std::unique_ptr<Material> material, std::string summary);

  TlsServerConfig config_;
  std::unique_ptr<Material> material_;
  std::string summary_;
};

// The SSL_CTX civetweb serves with. One per process: civetweb's callback carries no pointer of
// ours, so Install() makes this object the one its callback hands out.
class TlsServerContext {
 public:
  // Checks that civetweb was built with TLS and that it will find OpenSSL 3 under the names it
  // loads it by, loading kpathd's stand-ins for them (civetweb_openssl_names.c) first.
  static absl::Status CheckCivetwebCanServeTls();

  explicit TlsServerContext(std::shared_ptr<const TlsCredentials> credentials);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  // Makes this the context civetweb's external_ssl_ctx callback returns (until destroyed).
  void Install();
  // SIGHUP: connections from now on use `credentials`.
  void Use(std::shared_ptr<const TlsCredentials> credentials);
  std::shared_ptr<const TlsCredentials> credentials() const;

  // civetweb's external_ssl_ctx callback (struct mg_callbacks).
  static int ExternalSslContext(void** ssl_ctx, void* user_data);

 private:
  static int OnClientHello(ssl_st* ssl, int* alert, void* arg);

  ssl_ctx_st* ctx_ = nullptr;
  mutable absl::Mutex mu_;
  std::shared_ptr<const TlsCredentials> credentials_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kpath
