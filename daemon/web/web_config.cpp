#include "daemon/web/web_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "daemon/config_file.h"
#include "daemon/yaml_reader.h"
#include "fmt/format.h"

namespace kpath {
namespace {

// absl::StrCat takes absl::string_view, which Debian's abseil keeps apart from std::string_view.
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (out.append(fmt::format("{}", parts)), ...);
  return out;
}

constexpr std::array<std::pair<std::string_view, ClientAuth>, 5> kClientAuthNames = {{
    {"NoClientCert", ClientAuth::kNoClientCert},
    {"RequestClientCert", ClientAuth::kRequestClientCert},
    {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
    {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
    {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert},
}};
// TLS 1.0 and 1.1 are deprecated (RFC 8996): exporter-toolkit's TLS10 and TLS11 are refused.
constexpr std::array<std::pair<std::string_view, TlsVersion>, 2> kTlsVersionNames = {{
    {"TLS12", TlsVersion::kTls12},
    {"TLS13", TlsVersion::kTls13},
}};

// $2a$, $2b$ or $2y$, a two-digit cost from 04 to 31, then 22 characters of salt and 31 of hash
// in bcrypt's base64 alphabet: what `htpasswd -nBC 10 USER` and Go's bcrypt write.
bool IsBcryptHash(std::string_view hash) {
  if (hash.size() != 60 || !hash.starts_with("$2") || hash[3] != '$' || hash[6] != '$') {
    return false;
  }
  if (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') return false;
  if (!absl::ascii_isdigit(hash[4]) || !absl::ascii_isdigit(hash[5])) return false;
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  return std::all_of(hash.begin() + 7, hash.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '/';
  });
}

// exporter-toolkit settings kpathd does not implement: refused by name, not as unknown keys.
// Messages keep this file's own wording: "got nothing" and no "(first on line N)".
YamlFormat WebConfigFormat() {
  return YamlFormat{.null_shown = "nothing",
                    .duplicate_names_first_line = false,
                    .refuse_content_read_as_nothing = false,
                    .refused_keys = {"http_server_config", "rate_limit", "cert", "key", "client_ca",
                                     "cipher_suites", "curve_preferences",
                                     "prefer_server_cipher_suites", "client_allowed_sans"},
                    .refusal = "an exporter-toolkit setting kpathd does not support"};
}

class WebConfigParser {
 public:
  WebConfigParser(const YamlReader& reader, std::filesystem::path base_dir)
      : reader_(reader), base_dir_(std::move(base_dir)) {}

  absl::Status Parse(const YAML::Node& root, WebConfig& out) const {
    if (root.IsNull()) return absl::OkStatus();
    if (!root.IsMap()) {
      return reader_.Error(root.Mark(), Cat("expected a mapping with tls_server_config and/or "
                                            "basic_auth_users at the top level, got ",
                                            reader_.Describe(root)));
    }
    return reader_.ForEachKey(root, "", {"tls_server_config", "basic_auth_users"},
                              [&](const std::string& key, const YAML::Node& key_node,
                                  const YAML::Node& value) -> absl::Status {
                                if (key == "basic_auth_users") {
                                  return ParseUsers(key_node, value, out.basic_auth_users);
                                }
                                return ParseTls(key_node, value, out.tls);
                              });
  }

 private:
  absl::Status ParseUsers(const YAML::Node& key_node, const YAML::Node& value,
                          std::map<std::string, std::string, std::less<>>& users) const {
    if (value.IsNull()) return absl::OkStatus();
    if (!value.IsMap()) {
      return reader_.Expected(key_node, value, "basic_auth_users",
                              "a mapping of user names to bcrypt hashes");
    }
    for (const auto& entry : value) {
      const YAML::Node& user = entry.first;
      if (!user.IsScalar() || user.Scalar().empty() ||
          user.Scalar().find(':') != std::string::npos) {
        return reader_.Expected(user, user, "basic_auth_users",
                                "a user name (not empty, without \":\")");
      }
      const std::string path = Cat("basic_auth_users.", user.Scalar());
      // Never the text of a password hash.
      if (!entry.second.IsScalar() || !IsBcryptHash(entry.second.Scalar())) {
        return reader_.Error(
            user.Mark(),
            Cat(path,
                ": expected a bcrypt hash ($2y$, $2b$ or $2a$ and 53 characters, as `htpasswd "
                "-nBC 10 ",
                user.Scalar(), "` prints), got ",
                entry.second.IsScalar() ? "something else" : reader_.Describe(entry.second)));
      }
      if (!users.emplace(user.Scalar(), entry.second.Scalar()).second) {
        return reader_.Error(user.Mark(),
                             Cat("duplicate user \"", user.Scalar(), "\" in basic_auth_users"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseTls(const YAML::Node& key_node, const YAML::Node& value,
                        std::optional<TlsServerConfig>& out) const {
    if (value.IsNull()) return absl::OkStatus();  // an empty section: plain HTTP
    TlsServerConfig tls;
    absl::Status status = reader_.Section(
        key_node, value, "tls_server_config",
        {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version",
         "max_version"},
        [&](const std::string& key, const YAML::Node& child_key,
            const YAML::Node& child) -> absl::Status {
          const std::string path = Cat("tls_server_config.", key);
          if (key == "client_auth_type") {
            return reader_.Choice(child_key, child, path, kClientAuthNames, tls.client_auth);
          }
          if (key == "min_version") {
            return reader_.Choice(child_key, child, path, kTlsVersionNames, tls.min_version);
          }
          if (key == "max_version") {
            return reader_.Choice(child_key, child, path, kTlsVersionNames, tls.max_version);
          }
          WebConfigFileRef& file = key == "cert_file"  ? tls.cert_file
                                   : key == "key_file" ? tls.key_file
                                                       : tls.client_ca_file;
          absl::StatusOr<std::string> text = reader_.Scalar(child_key, child, path, "a file name");
          if (!text.ok()) return text.status();
          if (text->empty()) return absl::OkStatus();
          file.path = (base_dir_ / *text).lexically_normal().string();
          file.where = Cat(reader_.source(), ":", child_key.Mark().line + 1, ": ", path);
          return absl::OkStatus();
        });
    if (!status.ok()) return status;
    if (tls.cert_file.path.empty() && tls.key_file.path.empty() &&
        tls.client_ca_file.path.empty()) {
      return absl::OkStatus();  // as exporter-toolkit: no certificate, no TLS
    }
    auto at_section = [&](std::string_view message) {
      return reader_.Error(key_node.Mark(), message);
    };
    if (tls.cert_file.path.empty() || tls.key_file.path.empty()) {
      return at_section("tls_server_config: cert_file and key_file go together: set both");
    }
    const bool verifies = tls.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                          tls.client_auth == ClientAuth::kRequireAndVerifyClientCert;
    if (verifies && tls.client_ca_file.path.empty()) {
      return at_section(Cat("tls_server_config: client_auth_type ", ClientAuthName(tls.client_auth),
                            " needs client_ca_file to verify client certificates"));
    }
    if (!verifies && !tls.client_ca_file.path.empty()) {
      return at_section(Cat("tls_server_config: client_ca_file is set but client_auth_type ",
                            ClientAuthName(tls.client_auth),
                            " verifies no client certificate (use "
                            "RequireAndVerifyClientCert or VerifyClientCertIfGiven)"));
    }
    if (tls.min_version > tls.max_version) {
      return at_section(Cat("tls_server_config: min_version ", TlsVersionName(tls.min_version),
                            " is above max_version ", TlsVersionName(tls.max_version)));
    }
    out = std::move(tls);
    return absl::OkStatus();
  }

  const YamlReader& reader_;
  std::filesystem::path base_dir_;
};

}  // namespace

std::string_view TlsVersionName(TlsVersion version) {
  for (const auto& [name, v] : kTlsVersionNames) {
    if (v == version) return name;
  }
  return "?";
}

std::string_view ClientAuthName(ClientAuth auth) {
  for (const auto& [name, a] : kClientAuthNames) {
    if (a == auth) return name;
  }
  return "?";
}

absl::StatusOr<WebConfig> ParseWebConfig(std::string_view yaml_text, std::string_view source,
                                         const std::filesystem::path& base_dir) {
  const YamlReader reader(source, WebConfigFormat());
  WebConfig config;
  absl::Status status = reader.ReadDocument(yaml_text, [&](const YAML::Node& root) {
    return WebConfigParser(reader, base_dir).Parse(root, config);
  });
  if (!status.ok()) return status;
  return config;
}

absl::StatusOr<WebConfig> LoadWebConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadConfigFileText(path);
  if (!text.ok()) return text.status();
  return ParseWebConfig(*text, path, std::filesystem::absolute(path).parent_path());
}

}  // namespace kpath
