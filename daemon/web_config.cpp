#include "daemon/web_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <set>
#include <span>
#include <utility>

#include "absl/strings/ascii.h"
#include "daemon/config.h"
#include "fmt/format.h"

namespace kpath {
namespace {

using Names = std::span<const std::string_view>;

// absl::StrCat takes absl::string_view, which Debian's abseil keeps apart from std::string_view.
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (out.append(fmt::format("{}", parts)), ...);
  return out;
}

constexpr std::array<std::string_view, 2> kTopLevelKeys = {"tls_server_config", "basic_auth_users"};
constexpr std::array<std::string_view, 6> kTlsKeys = {
    "cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version"};
// exporter-toolkit settings kpathd does not implement: refused by name, not as unknown keys.
constexpr std::array<std::string_view, 9> kUnsupportedKeys = {"http_server_config",
                                                              "rate_limit",
                                                              "cert",
                                                              "key",
                                                              "client_ca",
                                                              "cipher_suites",
                                                              "curve_preferences",
                                                              "prefer_server_cipher_suites",
                                                              "client_allowed_sans"};

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

std::string Joined(Names names) {
  std::string out;
  for (std::string_view name : names) out += Cat(out.empty() ? "" : ", ", name);
  return out;
}

template <typename T, size_t N>
std::string JoinedFirsts(const std::array<std::pair<std::string_view, T>, N>& table) {
  std::array<std::string_view, N> names;
  std::transform(table.begin(), table.end(), names.begin(), [](const auto& e) { return e.first; });
  return Joined(names);
}

// What a value is, for "expected X, got Y"; never the text of a password hash.
std::string Shown(const YAML::Node& node) {
  if (node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return Cat("\"", node.Scalar().substr(0, 60), node.Scalar().size() > 60 ? "...\"" : "\"");
}

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

class WebConfigParser {
 public:
  WebConfigParser(std::string_view source, std::filesystem::path base_dir)
      : source_(source), base_dir_(std::move(base_dir)) {}

  absl::Status Parse(const YAML::Node& root, WebConfig& out) const {
    if (root.IsNull()) return absl::OkStatus();
    if (!root.IsMap()) {
      return At(root, Cat("expected a mapping with tls_server_config and/or "
                          "basic_auth_users at the top level, got ",
                          Shown(root)));
    }
    return Entries(root, "", kTopLevelKeys,
                   [&](const std::string& key, const YAML::Node& key_node,
                       const YAML::Node& value) -> absl::Status {
                     if (key == "basic_auth_users") {
                       return ParseUsers(key_node, value, out.basic_auth_users);
                     }
                     return ParseTls(key_node, value, out.tls);
                   });
  }

 private:
  absl::Status At(const YAML::Node& node, std::string_view message) const {
    if (node.Mark().is_null()) {
      return absl::InvalidArgumentError(Cat(source_, ": ", message));
    }
    return absl::InvalidArgumentError(Cat(source_, ":", node.Mark().line + 1, ": ", message));
  }

  // Visits each entry of `map` once its key is known to be a name from `known`, not repeated.
  template <typename Visit>
  absl::Status Entries(const YAML::Node& map, std::string_view section, Names known,
                       Visit visit) const {
    const std::string in = section.empty() ? "" : Cat(" in \"", section, "\"");
    std::set<std::string, std::less<>> seen;
    for (const auto& entry : map) {
      const YAML::Node& key_node = entry.first;
      if (!key_node.IsScalar()) {
        return At(key_node, Cat("expected a setting name", in, ", got ", Shown(key_node)));
      }
      const std::string& key = key_node.Scalar();
      const std::string path = section.empty() ? key : Cat(section, ".", key);
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        if (std::find(kUnsupportedKeys.begin(), kUnsupportedKeys.end(), key) !=
            kUnsupportedKeys.end()) {
          return At(key_node, Cat(path,
                                  ": an exporter-toolkit setting kpathd does not "
                                  "support (supported",
                                  in, ": ", Joined(known), ")"));
        }
        return At(key_node, Cat("unknown key \"", key, "\"", in, " (valid: ", Joined(known), ")"));
      }
      if (!seen.insert(key).second) {
        return At(key_node, Cat("duplicate key \"", key, "\"", in));
      }
      if (absl::Status status = visit(key, key_node, entry.second); !status.ok()) return status;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Text(const YAML::Node& key_node, const YAML::Node& value,
                                   std::string_view path, std::string_view expected) const {
    if (!value.IsScalar()) {
      return At(key_node, Cat(path, ": expected ", expected, ", got ", Shown(value)));
    }
    return value.Scalar();
  }

  template <typename T, size_t N>
  absl::Status Choice(const YAML::Node& key_node, const YAML::Node& value, std::string_view path,
                      const std::array<std::pair<std::string_view, T>, N>& table, T& out) const {
    const std::string expected = Cat("one of ", JoinedFirsts(table));
    absl::StatusOr<std::string> text = Text(key_node, value, path, expected);
    if (!text.ok()) return text.status();
    for (const auto& [name, choice] : table) {
      if (name == *text) {
        out = choice;
        return absl::OkStatus();
      }
    }
    return At(key_node, Cat(path, ": expected ", expected, ", got ", Shown(value)));
  }

  absl::Status ParseUsers(const YAML::Node& key_node, const YAML::Node& value,
                          std::map<std::string, std::string, std::less<>>& users) const {
    if (value.IsNull()) return absl::OkStatus();
    if (!value.IsMap()) {
      return At(key_node, Cat("basic_auth_users: expected a mapping of user names to "
                              "bcrypt hashes, got ",
                              Shown(value)));
    }
    for (const auto& entry : value) {
      const YAML::Node& user = entry.first;
      if (!user.IsScalar() || user.Scalar().empty() ||
          user.Scalar().find(':') != std::string::npos) {
        return At(user, Cat("basic_auth_users: expected a user name (not empty, "
                            "without \":\"), got ",
                            Shown(user)));
      }
      const std::string path = Cat("basic_auth_users.", user.Scalar());
      if (!entry.second.IsScalar() || !IsBcryptHash(entry.second.Scalar())) {
        return At(user, Cat(path,
                            ": expected a bcrypt hash ($2y$, $2b$ or $2a$ and 53 "
                            "characters, as `htpasswd -nBC 10 ",
                            user.Scalar(), "` prints), got ",
                            entry.second.IsScalar() ? "something else" : Shown(entry.second)));
      }
      if (!users.emplace(user.Scalar(), entry.second.Scalar()).second) {
        return At(user, Cat("duplicate user \"", user.Scalar(), "\" in basic_auth_users"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseTls(const YAML::Node& key_node, const YAML::Node& value,
                        std::optional<TlsServerConfig>& out) const {
    if (value.IsNull()) return absl::OkStatus();  // an empty section: plain HTTP
    if (!value.IsMap()) {
      return At(key_node, Cat("tls_server_config: expected a mapping, got ", Shown(value)));
    }
    TlsServerConfig tls;
    absl::Status status =
        Entries(value, "tls_server_config", kTlsKeys,
                [&](const std::string& key, const YAML::Node& child_key,
                    const YAML::Node& child) -> absl::Status {
                  const std::string path = Cat("tls_server_config.", key);
                  if (key == "client_auth_type") {
                    return Choice(child_key, child, path, kClientAuthNames, tls.client_auth);
                  }
                  if (key == "min_version") {
                    return Choice(child_key, child, path, kTlsVersionNames, tls.min_version);
                  }
                  if (key == "max_version") {
                    return Choice(child_key, child, path, kTlsVersionNames, tls.max_version);
                  }
                  WebConfigFileRef& file = key == "cert_file"  ? tls.cert_file
                                           : key == "key_file" ? tls.key_file
                                                               : tls.client_ca_file;
                  absl::StatusOr<std::string> text = Text(child_key, child, path, "a file name");
                  if (!text.ok()) return text.status();
                  if (text->empty()) return absl::OkStatus();
                  file.path = (base_dir_ / *text).lexically_normal().string();
                  file.where = Cat(source_, ":", child_key.Mark().line + 1, ": ", path);
                  return absl::OkStatus();
                });
    if (!status.ok()) return status;
    if (tls.cert_file.path.empty() && tls.key_file.path.empty() &&
        tls.client_ca_file.path.empty()) {
      return absl::OkStatus();  // as exporter-toolkit: no certificate, no TLS
    }
    if (tls.cert_file.path.empty() || tls.key_file.path.empty()) {
      return At(key_node, "tls_server_config: cert_file and key_file go together: set both");
    }
    const bool verifies = tls.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                          tls.client_auth == ClientAuth::kRequireAndVerifyClientCert;
    if (verifies && tls.client_ca_file.path.empty()) {
      return At(key_node,
                Cat("tls_server_config: client_auth_type ", ClientAuthName(tls.client_auth),
                    " needs client_ca_file to verify client certificates"));
    }
    if (!verifies && !tls.client_ca_file.path.empty()) {
      return At(key_node, Cat("tls_server_config: client_ca_file is set but "
                              "client_auth_type ",
                              ClientAuthName(tls.client_auth),
                              " verifies no client certificate (use "
                              "RequireAndVerifyClientCert or VerifyClientCertIfGiven)"));
    }
    if (tls.min_version > tls.max_version) {
      return At(key_node, Cat("tls_server_config: min_version ", TlsVersionName(tls.min_version),
                              " is above max_version ", TlsVersionName(tls.max_version)));
    }
    out = std::move(tls);
    return absl::OkStatus();
  }

  std::string source_;
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
  if (const int line = SecondYamlDocumentLine(yaml_text); line != 0) {
    return absl::InvalidArgumentError(
        Cat(source, ":", line, ": expected one YAML document, found a second one starting here"));
  }
  WebConfig config;
  try {
    const YAML::Node root = YAML::Load(std::string(yaml_text));
    if (absl::Status status = WebConfigParser(source, base_dir).Parse(root, config); !status.ok()) {
      return status;
    }
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return absl::InvalidArgumentError(Cat(source, ": ", e.msg));
    return absl::InvalidArgumentError(Cat(source, ":", e.mark.line + 1, ": ", e.msg));
  }
  return config;
}

absl::StatusOr<WebConfig> LoadWebConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadConfigFileText(path);
  if (!text.ok()) return text.status();
  return ParseWebConfig(*text, path, std::filesystem::absolute(path).parent_path());
}

}  // namespace kpath
