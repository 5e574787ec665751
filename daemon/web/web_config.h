// The web configuration file (--web.config.file, or web.config_file in kpathd.yaml): TLS and
// HTTP basic authentication for /metrics, in the Prometheus exporter-toolkit format
// (docs/web-configuration.md of prometheus/exporter-toolkit), validated as strictly as
// kpathd.yaml: an unknown or repeated key, a wrong type or a bad value is an error naming the
// file and line. Files it names are read when it is loaded (see web_tls.h); relative paths are
// relative to the web configuration file's own directory, as exporter-toolkit resolves them.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kpath {

enum class TlsVersion { kTls12, kTls13 };

// exporter-toolkit's client_auth_type values (Go's tls.ClientAuthType).
enum class ClientAuth {
  kNoClientCert,                // no client certificate is asked for
  kRequestClientCert,           // asked for, not required, not verified
  kRequireAnyClientCert,        // required, not verified
  kVerifyClientCertIfGiven,     // not required, verified against client_ca_file when sent
  kRequireAndVerifyClientCert,  // required and verified against client_ca_file
};

std::string_view TlsVersionName(TlsVersion version);
std::string_view ClientAuthName(ClientAuth auth);

// A file the web configuration names: its path, resolved, and where it is named (for errors
// found when it is read: "web.yml:4: tls_server_config.cert_file").
struct WebConfigFileRef {
  std::string path;  // empty: not set
  std::string where;
  bool operator==(const WebConfigFileRef&) const = default;
};

struct TlsServerConfig {
  WebConfigFileRef cert_file;  // PEM: the server certificate, then any intermediates
  WebConfigFileRef key_file;   // PEM: its private key
  WebConfigFileRef client_ca_file;
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  TlsVersion min_version = TlsVersion::kTls12;
  TlsVersion max_version = TlsVersion::kTls13;
  bool operator==(const TlsServerConfig&) const = default;
};

struct WebConfig {
  std::optional<TlsServerConfig> tls;  // nullopt: plain HTTP
  // User name -> bcrypt hash ($2a$, $2b$ or $2y$). Empty: no authentication.
  std::map<std::string, std::string, std::less<>> basic_auth_users;
  bool operator==(const WebConfig&) const = default;
};

// Parses the text of a web configuration file. `source` names it in errors
// ("<source>:<line>: <what>"); relative file paths are resolved against `base_dir`. An empty
// document is valid: plain HTTP, no authentication.
absl::StatusOr<WebConfig> ParseWebConfig(std::string_view yaml_text, std::string_view source,
                                         const std::filesystem::path& base_dir);

// Reads and parses a web configuration file (refused like kpathd.yaml if world-writable).
absl::StatusOr<WebConfig> LoadWebConfigFile(const std::string& path);

}  // namespace kpath
