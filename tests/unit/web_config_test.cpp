// The web configuration file (exporter-toolkit format), the basic-auth users it names, and the
// civetweb options kpathd serves /metrics with.
#include "daemon/web/web_config.h"

#include <crypt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon/web/basic_auth.h"
#include "daemon/web/metrics_server.h"
#include "support/temp_dir.h"

namespace kpath {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using testing::TempDir;

WebConfig Parse(const std::string& yaml) {
  absl::StatusOr<WebConfig> config = ParseWebConfig(yaml, "web.yml", "/etc/kpathd");
  INFO(yaml);
  if (!config.ok()) INFO(config.status().message());
  REQUIRE(config.ok());
  return *config;
}

std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<WebConfig> config = ParseWebConfig(yaml, "web.yml", "/etc/kpathd");
  INFO(yaml);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

// A bcrypt hash of `password` at `cost` (4 keeps the tests fast), as htpasswd -B writes it.
std::string Bcrypt(const std::string& password, int cost = 4, const char* prefix = "$2y$") {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  REQUIRE(crypt_gensalt_rn(prefix, cost, nullptr, 0, setting, sizeof(setting)) != nullptr);
  crypt_data data{};
  const char* hash = crypt_r(password.c_str(), setting, &data);
  REQUIRE(hash != nullptr);
  REQUIRE(hash[0] == '$');
  return hash;
}

const std::string kAliceHash = "$2y$04$Fn7.0/MWrbWTBWBZTKSxB.0UaW0.f1o2oIf2fIbLhBwFmydn8lMLS";

// --- The file format ---

TEST_CASE("an empty web configuration is plain HTTP without authentication") {
  CHECK(Parse("") == WebConfig{});
  CHECK(Parse("# nothing\n") == WebConfig{});
  CHECK(Parse("tls_server_config:\nbasic_auth_users:\n") == WebConfig{});
  // As exporter-toolkit: a TLS section without certificate means no TLS.
  CHECK(Parse("tls_server_config:\n  min_version: TLS13\n") == WebConfig{});
}

TEST_CASE("every supported setting is read, relative paths from the file's directory") {
  const WebConfig config = Parse(R"(
tls_server_config:
  cert_file: tls/server.crt
  key_file: /secret/server.key
  client_ca_file: ../ca.pem
  client_auth_type: RequireAndVerifyClientCert
  min_version: TLS13
  max_version: TLS13
basic_auth_users:
  alice: )" + kAliceHash + R"(
  bob: "$2b$12$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234"
)");
  REQUIRE(config.tls);
  CHECK(config.tls->cert_file.path == "/etc/kpathd/tls/server.crt");
  CHECK(config.tls->cert_file.where == "web.yml:3: tls_server_config.cert_file");
  CHECK(config.tls->key_file.path == "/secret/server.key");
  CHECK(config.tls->client_ca_file.path == "/etc/ca.pem");
  CHECK(config.tls->client_auth == ClientAuth::kRequireAndVerifyClientCert);
  CHECK(config.tls->min_version == TlsVersion::kTls13);
  CHECK(config.tls->max_version == TlsVersion::kTls13);
  CHECK(config.basic_auth_users.size() == 2);
  CHECK(config.basic_auth_users.at("alice") == kAliceHash);
}

TEST_CASE("TLS defaults: TLS12 to TLS13, no client certificate") {
  const WebConfig config = Parse("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n");
  REQUIRE(config.tls);
  CHECK(config.tls->min_version == TlsVersion::kTls12);
  CHECK(config.tls->max_version == TlsVersion::kTls13);
  CHECK(config.tls->client_auth == ClientAuth::kNoClientCert);
  CHECK(config.tls->client_ca_file.path.empty());
}

TEST_CASE("every client_auth_type of exporter-toolkit is accepted") {
  for (const auto& [name, auth] : std::vector<std::pair<std::string, ClientAuth>>{
           {"NoClientCert", ClientAuth::kNoClientCert},
           {"RequestClientCert", ClientAuth::kRequestClientCert},
           {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
           {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
           {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert}}) {
    const bool verifies = auth == ClientAuth::kVerifyClientCertIfGiven ||
                          auth == ClientAuth::kRequireAndVerifyClientCert;
    const WebConfig config = Parse(
        "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: " + name +
        (verifies ? "\n  client_ca_file: ca.pem\n" : "\n"));
    CHECK(config.tls->client_auth == auth);
    CHECK(ClientAuthName(auth) == name);
  }
}

TEST_CASE("unknown, unsupported and repeated keys are errors naming the line") {
  CHECK(ErrorOf("basic_auth_users:\nbasic_auth:\n") ==
        "web.yml:2: unknown key \"basic_auth\" (valid: tls_server_config, basic_auth_users)");
  CHECK(ErrorOf("tls_server_config:\n  cert_file: a\n  keyfile: b\n") ==
        "web.yml:3: unknown key \"keyfile\" in \"tls_server_config\" (valid: cert_file, "
        "key_file, client_ca_file, client_auth_type, min_version, max_version)");
  CHECK_THAT(ErrorOf("http_server_config:\n  http2: false\n"),
             StartsWith("web.yml:1: http_server_config: an exporter-toolkit setting kpathd does "
                        "not support"));
  CHECK_THAT(ErrorOf("tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"),
             StartsWith("web.yml:2: tls_server_config.cipher_suites: an exporter-toolkit setting "
                        "kpathd does not support"));
  CHECK(ErrorOf("tls_server_config:\n  cert_file: a\n  cert_file: b\n") ==
        "web.yml:3: duplicate key \"cert_file\" in \"tls_server_config\"");
  CHECK(ErrorOf("basic_auth_users:\n  alice: " + kAliceHash + "\n  alice: " + kAliceHash + "\n") ==
        "web.yml:3: duplicate user \"alice\" in basic_auth_users");
}

TEST_CASE("wrong values are errors naming the line and what was expected") {
  CHECK(ErrorOf("- a\n") ==
        "web.yml:1: expected a mapping with tls_server_config and/or "
        "basic_auth_users at the top level, got a list");
  CHECK(ErrorOf("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n") ==
        "web.yml:4: tls_server_config.min_version: expected one of TLS12, TLS13, got \"TLS10\"");
  CHECK(ErrorOf("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: "
                "RequireClientCert\n") ==
        "web.yml:4: tls_server_config.client_auth_type: expected one of NoClientCert, "
        "RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, "
        "RequireAndVerifyClientCert, got \"RequireClientCert\"");
  CHECK(ErrorOf("tls_server_config:\n  cert_file: [a]\n") ==
        "web.yml:2: tls_server_config.cert_file: expected a file name, got a list");
  CHECK(ErrorOf("tls_server_config: yes\n") ==
        "web.yml:1: tls_server_config: expected a mapping, got \"yes\"");
  CHECK(ErrorOf("basic_auth_users: [alice]\n") ==
        "web.yml:1: basic_auth_users: expected a mapping of user names to bcrypt hashes, got a "
        "list");
}

TEST_CASE("TLS settings that cannot work together are refused") {
  CHECK(ErrorOf("tls_server_config:\n  cert_file: a.crt\n") ==
        "web.yml:1: tls_server_config: cert_file and key_file go together: set both");
  CHECK(ErrorOf("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: "
                "RequireAndVerifyClientCert\n") ==
        "web.yml:1: tls_server_config: client_auth_type RequireAndVerifyClientCert needs "
        "client_ca_file to verify client certificates");
  CHECK_THAT(ErrorOf("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n"),
             StartsWith("web.yml:1: tls_server_config: client_ca_file is set but "
                        "client_auth_type NoClientCert verifies no client certificate"));
  CHECK(ErrorOf("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  "
                "max_version: TLS12\n") ==
        "web.yml:1: tls_server_config: min_version TLS13 is above max_version TLS12");
}

TEST_CASE("a password that is not a bcrypt hash is refused without printing it") {
  const std::string error = ErrorOf("basic_auth_users:\n  alice: hunter2\n");
  CHECK_THAT(error, StartsWith("web.yml:2: basic_auth_users.alice: expected a bcrypt hash"));
  CHECK_THAT(error, !Contains("hunter2"));
  // SHA-512 crypt, a cost out of range, a truncated hash.
  ErrorOf("basic_auth_users:\n  alice: \"$6$salt$abc\"\n");
  ErrorOf(
      "basic_auth_users:\n  alice: "
      "\"$2y$03$Fn7.0/MWrbWTBWBZTKSxB.0UaW0.f1o2oIf2fIbLhBwFmydn8lMLS\"\n");
  ErrorOf("basic_auth_users:\n  alice: \"" + kAliceHash.substr(0, 59) + "\"\n");
  CHECK_THAT(ErrorOf("basic_auth_users:\n  \"a:b\": " + kAliceHash + "\n"),
             StartsWith("web.yml:2: basic_auth_users: expected a user name (not empty, without "
                        "\":\"), got \"a:b\""));
}

TEST_CASE("a second YAML document and malformed YAML are errors with a line") {
  CHECK(ErrorOf("basic_auth_users:\n---\nbasic_auth_users:\n") ==
        "web.yml:2: expected one YAML document, found a second one starting here");
  CHECK_THAT(ErrorOf("tls_server_config:\n  cert_file: [a\n"), StartsWith("web.yml:"));
}

TEST_CASE("the web configuration file: missing, world-writable, relative paths") {
  TempDir dir;
  absl::StatusOr<WebConfig> missing = LoadWebConfigFile(dir.path() + "/none.yml");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()),
             StartsWith("open " + dir.path() + "/none.yml: No such file"));

  const std::string body = "tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n";
  absl::StatusOr<WebConfig> loaded = LoadWebConfigFile(dir.Write("web.yml", body));
  REQUIRE(loaded.ok());
  CHECK(loaded->tls->cert_file.path == dir.path() + "/s.crt");
  CHECK(loaded->tls->cert_file.where == dir.path() + "/web.yml:2: tls_server_config.cert_file");

  absl::StatusOr<WebConfig> writable = LoadWebConfigFile(dir.Write("open.yml", body, 0666));
  REQUIRE_FALSE(writable.ok());
  CHECK_THAT(std::string(writable.status().message()), Contains("world-writable"));
}

TEST_CASE(
    "certificate files are read when the configuration is loaded: errors name file and line") {
  TempDir dir;
  const std::string path =
      dir.Write("web.yml", "tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n");
  WebServerConfig web;
  web.config_file = path;
  absl::StatusOr<WebSecurity> missing = LoadWebSecurity(web);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()),
             StartsWith(path + ":2: tls_server_config.cert_file: open " + dir.path() +
                        "/s.crt: No such file"));
  dir.Write("s.crt", "not a certificate\n");
  absl::StatusOr<WebSecurity> garbage = LoadWebSecurity(web);
  REQUIRE_FALSE(garbage.ok());
  CHECK_THAT(std::string(garbage.status().message()),
             StartsWith(path + ":2: tls_server_config.cert_file: " + dir.path() +
                        "/s.crt: no PEM certificate in it"));
}

// --- Basic auth ---

TEST_CASE("basic auth: the right password passes, a wrong one or an unknown user does not") {
  auto users = BasicAuthUsers::Create({{"alice", Bcrypt("secret")}, {"bob", Bcrypt("other")}});
  REQUIRE(users.ok());
  CHECK((*users)->Check("alice", "secret"));
  CHECK((*users)->Check("bob", "other"));
  CHECK_FALSE((*users)->Check("alice", "other"));
  CHECK_FALSE((*users)->Check("alice", ""));
  CHECK_FALSE((*users)->Check("carol", "secret"));
  CHECK_FALSE((*users)->Check("", ""));
  // htpasswd writes $2y$, Go's bcrypt $2a$, OpenBSD's $2b$: libcrypt checks them all.
  auto kinds = BasicAuthUsers::Create(
      {{"a", Bcrypt("pw", 4, "$2a$")}, {"b", Bcrypt("pw", 4, "$2b$")}, {"y", kAliceHash}});
  REQUIRE(kinds.ok());
  CHECK((*kinds)->Check("a", "pw"));
  CHECK((*kinds)->Check("b", "pw"));
  CHECK_FALSE((*kinds)->Check("y", "wrong"));
}

TEST_CASE("basic auth: no users accept nobody") {
  auto none = BasicAuthUsers::Create({});
  REQUIRE(none.ok());
  CHECK_FALSE((*none)->Check("", ""));
}

TEST_CASE("basic auth: an unknown user costs one bcrypt, as a known one does") {
  auto users = BasicAuthUsers::Create({{"alice", Bcrypt("secret", 8)}});
  REQUIRE(users.ok());
  BasicAuthUsers& u = **users;
  auto time_of = [&](const char* user) {
    auto best = std::chrono::nanoseconds::max();
    for (int i = 0; i < 3; ++i) {
      const auto begin = std::chrono::steady_clock::now();
      CHECK_FALSE(u.Check(user, "wrong"));
      best = std::min(best, std::chrono::steady_clock::now() - begin);
    }
    return std::chrono::duration<double>(best).count();
  };
  const uint64_t before = u.bcrypt_runs();
  const double known = time_of("alice");
  CHECK(u.bcrypt_runs() == before + 3);
  const double unknown = time_of("mallory");
  CHECK(u.bcrypt_runs() == before + 6);
  INFO("known user " << known << " s, unknown user " << unknown << " s");
  // The same cost either way (bcrypt at cost 8 is a few milliseconds); loose bounds for a busy
  // host.
  CHECK(unknown > known / 3);
  CHECK(unknown < known * 3);
}

TEST_CASE("basic auth: successes are cached for a minute, failures never") {
  absl::Time now = absl::FromUnixSeconds(1000000);
  auto users = BasicAuthUsers::Create({{"alice", Bcrypt("secret")}}, [&] { return now; });
  REQUIRE(users.ok());
  BasicAuthUsers& u = **users;
  CHECK(u.Check("alice", "secret"));
  CHECK(u.bcrypt_runs() == 1);
  now += absl::Seconds(59);
  CHECK(u.Check("alice", "secret"));
  CHECK(u.bcrypt_runs() == 1);
  now += absl::Seconds(2);  // past the minute: checked again
  CHECK(u.Check("alice", "secret"));
  CHECK(u.bcrypt_runs() == 2);
  CHECK_FALSE(u.Check("alice", "guess"));
  CHECK_FALSE(u.Check("alice", "guess"));
  CHECK(u.bcrypt_runs() == 4);
  // A cached success is for that user and password only.
  CHECK_FALSE(u.Check("alice", "secreT"));
  CHECK(u.bcrypt_runs() == 5);
}

TEST_CASE("basic auth: 32 scrapes at once with the same credentials cost one bcrypt") {
  auto users = BasicAuthUsers::Create({{"prometheus", Bcrypt("scrape", 6)}});
  REQUIRE(users.ok());
  std::vector<std::thread> threads;
  std::atomic<int> passed{0};
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&] { passed += (*users)->Check("prometheus", "scrape") ? 1 : 0; });
  }
  for (std::thread& t : threads) t.join();
  CHECK(passed == 32);
  CHECK((*users)->bcrypt_runs() == 1);
}

// --- civetweb ---

TEST_CASE("civetweb options: TLS port suffix, limits and keep-alive from web:, no files") {
  WebServerConfig web;
  std::vector<std::string> plain = CivetwebOptions("127.0.0.1:9477", web, false);
  CHECK(plain == std::vector<std::string>{"listening_ports", "127.0.0.1:9477", "num_threads", "128",
                                          "connection_queue", "128", "request_timeout_ms", "5000",
                                          "enable_keep_alive", "yes", "keep_alive_timeout_ms",
                                          "75000", "max_request_size", "16384"});
  web.keep_alive_timeout = absl::ZeroDuration();
  std::vector<std::string> one_request = CivetwebOptions("127.0.0.1:9477", web, false);
  CHECK(one_request[9] == "no");
  web.max_connections = 16;
  web.request_timeout = absl::Milliseconds(1500);
  std::vector<std::string> tls = CivetwebOptions("0.0.0.0:9477", web, true);
  CHECK(tls[1] == "0.0.0.0:9477s");
  CHECK(tls[3] == "16");
  CHECK(tls[7] == "1500");
  CHECK(std::find(tls.begin(), tls.end(), "document_root") == tls.end());
}

}  // namespace
}  // namespace kpath
