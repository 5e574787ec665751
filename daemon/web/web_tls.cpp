#include "daemon/web/web_tls.h"

#include <civetweb.h>
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <atomic>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "daemon/config_file.h"
#include "fmt/format.h"

namespace kpath {
namespace {

std::atomic<TlsServerContext*> g_installed{nullptr};

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// Reads PEM text through OpenSSL from a file's contents.
struct Bio {
  explicit Bio(const std::string& text)
      : bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))) {}
  ~Bio() { BIO_free(bio); }
  BIO* bio;
};

// Never prompts on a terminal for a passphrase: an encrypted key is refused instead.
int NoPassphrase(char*, int, int, void*) { return 0; }

int AcceptAnyCertificate(int, X509_STORE_CTX*) { return 1; }

int ProtocolVersion(TlsVersion version) {
  return version == TlsVersion::kTls13 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

std::string Describe(X509* cert) {
  std::string out;
  BIO* bio = BIO_new(BIO_s_mem());
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB);
  BIO_puts(bio, ", expires ");
  ASN1_TIME_print(bio, X509_get0_notAfter(cert));
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) BIO_puts(bio, " (EXPIRED)");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  out.assign(data, static_cast<size_t>(size));
  BIO_free(bio);
  return out;
}

}  // namespace

struct TlsCredentials::Material {
  X509* cert = nullptr;
  STACK_OF(X509) * chain = sk_X509_new_null();
  EVP_PKEY* key = nullptr;
  X509_STORE* client_cas = nullptr;
  STACK_OF(X509_NAME) * client_ca_names = nullptr;

  ~Material() {
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    X509_STORE_free(client_cas);
    sk_X509_NAME_pop_free(client_ca_names, X509_NAME_free);
  }
};

TlsCredentials::TlsCredentials(TlsServerConfig config, std::unique_ptr<Material> material,
                               std::string summary)
    : config_(std::move(config)), material_(std::move(material)), summary_(std::move(summary)) {}

TlsCredentials::~TlsCredentials() = default;

absl::StatusOr<std::shared_ptr<const TlsCredentials>> TlsCredentials::Load(
    const TlsServerConfig& config) {
  auto problem = [](const WebConfigFileRef& file, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(file.where, ": ", file.path, ": ", what));
  };
  auto read = [&](const WebConfigFileRef& file) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> text = ReadConfigFileText(file.path);
    if (!text.ok())
      return absl::InvalidArgumentError(absl::StrCat(file.where, ": ", text.status().message()));
    return text;
  };
  ERR_clear_error();
  auto m = std::make_unique<Material>();

  absl::StatusOr<std::string> cert_text = read(config.cert_file);
  if (!cert_text.ok()) return cert_text.status();
  {
    Bio pem(*cert_text);
    m->cert = PEM_read_bio_X509(pem.bio, nullptr, NoPassphrase, nullptr);
    if (!m->cert) return problem(config.cert_file, "no PEM certificate in it: " + OpenSslError());
    // Intermediates follow the server's own certificate.
    while (X509* next = PEM_read_bio_X509(pem.bio, nullptr, NoPassphrase, nullptr)) {
      sk_X509_push(m->chain, next);
    }
    ERR_clear_error();  // the end of the text
  }

  absl::StatusOr<std::string> key_text = read(config.key_file);
  if (!key_text.ok()) return key_text.status();
  {
    Bio pem(*key_text);
    m->key = PEM_read_bio_PrivateKey(pem.bio, nullptr, NoPassphrase, nullptr);
    if (!m->key) {
      return problem(config.key_file, "no unencrypted PEM private key in it: " + OpenSslError());
    }
  }
  if (X509_check_private_key(m->cert, m->key) != 1) {
    ERR_clear_error();
    return problem(config.key_file, absl::StrCat("not the key of ", config.cert_file.path));
  }

  if (!config.client_ca_file.path.empty()) {
    absl::StatusOr<std::string> ca_text = read(config.client_ca_file);
    if (!ca_text.ok()) return ca_text.status();
    Bio pem(*ca_text);
    m->client_cas = X509_STORE_new();
    m->client_ca_names = sk_X509_NAME_new_null();
    while (X509* ca = PEM_read_bio_X509(pem.bio, nullptr, NoPassphrase, nullptr)) {
      X509_STORE_add_cert(m->client_cas, ca);
      sk_X509_NAME_push(m->client_ca_names, X509_NAME_dup(X509_get_subject_name(ca)));
      X509_free(ca);
    }
    ERR_clear_error();
    if (sk_X509_NAME_num(m->client_ca_names) == 0) {
      return problem(config.client_ca_file, "no PEM certificate in it");
    }
  }
  std::string summary = Describe(m->cert);
  return std::shared_ptr<const TlsCredentials>(
      new TlsCredentials(config, std::move(m), std::move(summary)));
}

bool TlsCredentials::ApplyTo(SSL* ssl) const {
  if (SSL_use_cert_and_key(ssl, material_->cert, material_->key, material_->chain, 1) != 1) {
    return false;
  }
  SSL_set_min_proto_version(ssl, ProtocolVersion(config_.min_version));
  SSL_set_max_proto_version(ssl, ProtocolVersion(config_.max_version));
  // Go's tls.ClientAuthType: asked for, required, and verified against client_ca_file or not.
  const ClientAuth auth = config_.client_auth;
  const bool required =
      auth == ClientAuth::kRequireAnyClientCert || auth == ClientAuth::kRequireAndVerifyClientCert;
  const bool verified = auth == ClientAuth::kVerifyClientCertIfGiven ||
                        auth == ClientAuth::kRequireAndVerifyClientCert;
  const int mode = auth == ClientAuth::kNoClientCert ? SSL_VERIFY_NONE
                   : required ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                              : SSL_VERIFY_PEER;
  SSL_set_verify(ssl, mode, verified || mode == SSL_VERIFY_NONE ? nullptr : AcceptAnyCertificate);
  if (material_->client_cas) {
    SSL_set1_verify_cert_store(ssl, material_->client_cas);
    SSL_set_client_CA_list(ssl, SSL_dup_CA_list(material_->client_ca_names));
  }
  return true;
}

absl::Status TlsServerContext::CheckCivetwebCanServeTls() {
  if (mg_check_feature(MG_FEATURES_TLS) == 0) {
    return absl::FailedPreconditionError(
        "TLS: this civetweb library was built without TLS (mg_check_feature(2) is 0)");
  }
  // civetweb_openssl_names.c: loaded once, for the life of the process.
  static const std::string not_loaded = [] {
    std::error_code ec;
    const std::filesystem::path dir =
        std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
    std::string problems;
    for (const char* name : {"libkpath-civetweb-libcrypto.so", "libkpath-civetweb-libssl.so"}) {
      bool loaded = false;
      for (const std::filesystem::path& where : {dir, dir / "../lib/kpathd"}) {
        const std::string path = (where / name).lexically_normal().string();
        if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
          loaded = true;
          break;
        }
        problems += fmt::format("; {}", dlerror());
      }
      (void)loaded;
    }
    return problems;
  }();
  // What civetweb will find under the names it loads.
  void* ssl = dlopen("libssl.so", RTLD_LAZY | RTLD_LOCAL);
  void* crypto = dlopen("libcrypto.so", RTLD_LAZY | RTLD_LOCAL);
  const bool usable = ssl && crypto && dlsym(ssl, "SSL_get_peer_certificate") != nullptr;
  if (ssl) dlclose(ssl);
  if (crypto) dlclose(crypto);
  if (!usable) {
    return absl::FailedPreconditionError(fmt::format(
        "TLS: civetweb 1.15 loads OpenSSL as libssl.so and libcrypto.so and needs "
        "SSL_get_peer_certificate, which OpenSSL 3 no longer exports; kpathd's stand-ins "
        "(libkpath-civetweb-libssl.so and -libcrypto.so, next to kpathd or in ../lib/kpathd) "
        "could not be loaded{}",
        not_loaded));
  }
  return absl::OkStatus();
}

TlsServerContext::TlsServerContext(std::shared_ptr<const TlsCredentials> credentials)
    : ctx_(SSL_CTX_new(TLS_server_method())), credentials_(std::move(credentials)) {
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  // No session is resumed (a resumed session skips the client-certificate check of the moment).
  SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(ctx_, 0);
  SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
  static constexpr unsigned char kSessionContext[] = "kpathd";
  SSL_CTX_set_session_id_context(ctx_, kSessionContext, sizeof(kSessionContext) - 1);
  SSL_CTX_set_client_hello_cb(ctx_, OnClientHello, this);
}

TlsServerContext::~TlsServerContext() {
  TlsServerContext* self = this;
  g_installed.compare_exchange_strong(self, nullptr);
  SSL_CTX_free(ctx_);
}

void TlsServerContext::Install() { g_installed.store(this); }

void TlsServerContext::Use(std::shared_ptr<const TlsCredentials> credentials) {
  absl::MutexLock lock(&mu_);
  credentials_ = std::move(credentials);
}

std::shared_ptr<const TlsCredentials> TlsServerContext::credentials() const {
  absl::MutexLock lock(&mu_);
  return credentials_;
}

int TlsServerContext::ExternalSslContext(void** ssl_ctx, void* /*user_data*/) {
  // Called again with the context when civetweb stops: 1 = ours to free, not civetweb's.
  if (*ssl_ctx != nullptr) return 1;
  TlsServerContext* installed = g_installed.load();
  if (!installed) return -1;
  *ssl_ctx = installed->ctx_;
  return 1;
}

int TlsServerContext::OnClientHello(SSL* ssl, int* alert, void* arg) {
  std::shared_ptr<const TlsCredentials> credentials =
      static_cast<TlsServerContext*>(arg)->credentials();
  if (!credentials || !credentials->ApplyTo(ssl)) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_CLIENT_HELLO_ERROR;
  }
  return SSL_CLIENT_HELLO_SUCCESS;
}

}  // namespace kpath
