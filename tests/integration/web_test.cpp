// /metrics under load and attack, with basic auth and with TLS: the real kpathd, real HTTP (and
// curl for TLS) on loopback. Figures (latencies, counts) are printed on stdout as "[web] ...".
#include <crypt.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "support/kpathd_process.h"
#include "support/temp_dir.h"

using namespace std::chrono_literals;
using namespace kpath::testing;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A TCP connection to 127.0.0.1:port that the test drives byte by byte.
class Connection {
 public:
  explicit Connection(int port) : fd_(ConnectLoopback(port)) {}
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool Send(std::string_view data) {
    return send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // Whether the server has closed (or reset) the connection: polls without blocking.
  bool ClosedByServer() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    char byte;
    return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
  }
  // One response: its headers and as many body bytes as their Content-Length, the connection
  // left open (keep-alive). Empty if it does not come whole within `timeout`.
  std::string ReadResponse(std::chrono::milliseconds timeout) {
    std::string data;
    const auto deadline = Clock::now() + timeout;
    char buffer[65536];
    while (Clock::now() < deadline) {
      const size_t body = data.find("\r\n\r\n");
      const size_t length = data.find("\r\nContent-Length: ");
      if (body != std::string::npos && length != std::string::npos && length < body &&
          data.size() - body - 4 >= std::strtoul(data.c_str() + length + 18, nullptr, 10)) {
        return data;
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      data.append(buffer, static_cast<size_t>(n));
    }
    return "";
  }
  // Everything until the server closes, or until `timeout`.
  std::string ReadToClose(std::chrono::milliseconds timeout) {
    std::string data;
    const auto deadline = Clock::now() + timeout;
    char buffer[65536];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      data.append(buffer, static_cast<size_t>(n));
    }
    return data;
  }

 private:
  int fd_ = -1;
};

std::string Request(const std::string& extra_headers = "") {
  return "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers +
         "\r\n";
}

// A request as Prometheus sends it: HTTP/1.1, the connection kept for the next scrape.
std::string KeepAliveRequest() { return "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"; }

// A whole response: a 200 with as many body bytes as its Content-Length, and the build info.
bool CompleteScrape(const std::string& raw) {
  const size_t length = raw.find("\r\nContent-Length: ");
  const size_t body = raw.find("\r\n\r\n");
  if (!raw.starts_with("HTTP/1.1 200") || length == std::string::npos ||
      body == std::string::npos) {
    return false;
  }
  return std::strtoul(raw.c_str() + length + 18, nullptr, 10) == raw.size() - body - 4 &&
         raw.find("kpath_build_info") != std::string::npos;
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::string BcryptHash(const std::string& password) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  REQUIRE(crypt_gensalt_rn("$2y$", 10, nullptr, 0, setting, sizeof(setting)));
  crypt_data data{};
  return crypt_r(password.c_str(), setting, &data);
}

std::string BasicAuth(const std::string& user, const std::string& password) {
  return "Authorization: Basic " + absl::Base64Escape(user + ":" + password) + "\r\n";
}

std::string Openssl(const std::string& args) {
  CommandResult r = RunCommand("openssl " + args);
  INFO("openssl " << args << "\n" << r.output);
  REQUIRE(r.status == 0);
  return r.output;
}

// A CA, a server certificate for 127.0.0.1 signed by it, a client certificate signed by it, and
// a self-signed client certificate no CA vouches for: `<name>.crt` and `<name>.key` in `dir`.
void MakeCertificates(const TempDir& dir) {
  auto key = [&](const std::string& name) {
    Openssl("genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out " + dir / (name + ".key"));
  };
  key("ca");
  Openssl("req -x509 -new -key " + dir / "ca.key" + " -subj /CN=kpath-test-ca -days 1 -out " +
          dir / "ca.crt");
  auto signed_by_ca = [&](const std::string& name, const std::string& ext) {
    key(name);
    Openssl("req -new -key " + dir / (name + ".key") + " -subj /CN=" + name + " -out " +
            dir / (name + ".csr"));
    dir.Write(name + ".ext", ext);
    Openssl("x509 -req -in " + dir / (name + ".csr") + " -CA " + dir / "ca.crt" + " -CAkey " +
            dir / "ca.key" + " -CAcreateserial -days 1 -extfile " + dir / (name + ".ext") +
            " -out " + dir / (name + ".crt"));
  };
  signed_by_ca("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  signed_by_ca("client", "extendedKeyUsage=clientAuth\n");
  key("rogue");
  Openssl("req -x509 -new -key " + dir / "rogue.key" + " -subj /CN=rogue -days 1 -out " +
          dir / "rogue.crt");
}

struct CurlResult {
  int exit_code = -1;
  int http_status = 0;
  std::string body;
};

// curl https://127.0.0.1:port/path with `options`; the body lands in `dir`.
CurlResult Curl(const TempDir& dir, int port, const std::string& options,
                const std::string& path = "/metrics") {
  const std::string body = dir / "curl.body";
  CommandResult r = RunCommand("curl -sS --max-time 10 -o " + body + " -w '%{http_code}' " +
                               options + " https://127.0.0.1:" + std::to_string(port) + path);
  CurlResult out;
  out.exit_code = r.status;
  out.http_status = std::atoi(r.output.c_str());
  std::ifstream in(body);
  out.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::filesystem::remove(body);
  INFO("curl " << options << ": exit " << r.status << ", " << r.output);
  return out;
}

}  // namespace

TEST_CASE("100 idle connections do not delay a scrape", "[web][limits]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 1s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  std::vector<std::unique_ptr<Connection>> idle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<Connection>(kpathd.port()));
    REQUIRE(idle.back()->connected());
  }
  std::this_thread::sleep_for(300ms);  // accepted and waiting in civetweb's threads

  const auto begin = Clock::now();
  Connection scrape(kpathd.port());
  REQUIRE(scrape.Send(Request()));
  const std::string raw = scrape.ReadToClose(5s);
  const double took = Seconds(Clock::now() - begin);
  std::cout << "[web] scrape with 100 idle connections held: " << took * 1000 << " ms, "
            << raw.size() << " bytes\n";
  CHECK(CompleteScrape(raw));
  CHECK(took < 1.0);
  int still_open = 0;
  for (auto& c : idle) still_open += c->ClosedByServer() ? 0 : 1;
  CHECK(still_open == 100);  // they were held open all along, not refused
}

TEST_CASE("idle connections beyond max_connections delay a scrape by about request_timeout",
          "[web][limits]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd(
      {.config_yaml =
           "sampling_interval: 1s\nweb:\n  max_connections: 4\n  request_timeout: 1s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  std::vector<std::unique_ptr<Connection>> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(std::make_unique<Connection>(kpathd.port()));
  std::this_thread::sleep_for(100ms);
  const auto begin = Clock::now();
  auto response = HttpGet(kpathd.port(), "/metrics", 10s);
  const double took = Seconds(Clock::now() - begin);
  std::cout << "[web] scrape behind 8 idle connections with 4 threads and a 1 s timeout: " << took
            << " s\n";
  REQUIRE(response);
  CHECK(response->status == 200);
  // Two rounds of 4 idle connections timing out, then the scrape.
  CHECK(took < 4.0);
}

TEST_CASE("keep-alive: two scrapes over one connection, closed after keep_alive_timeout idle",
          "[web][keep-alive]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 1s\nweb:\n  keep_alive_timeout: 2s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  Connection c(kpathd.port());
  REQUIRE(c.Send(KeepAliveRequest()));
  const std::string first = c.ReadResponse(5s);
  CHECK(CompleteScrape(first));
  std::this_thread::sleep_for(500ms);  // idle, within keep_alive_timeout
  REQUIRE_FALSE(c.ClosedByServer());
  REQUIRE(c.Send(KeepAliveRequest()));
  const std::string second = c.ReadResponse(5s);
  CHECK(CompleteScrape(second));
  // Idle past keep_alive_timeout: the server closes it (and frees its thread).
  const auto idle = Clock::now();
  CHECK(WaitUntil([&] { return c.ClosedByServer(); }, 10s));
  std::cout << "[web] kept-alive connection closed by kpathd after " << Seconds(Clock::now() - idle)
            << " s idle (keep_alive_timeout 2s)\n";
  CHECK(Clock::now() - idle >= 1s);

  // curl, as a load tool: a second URL on the same command line reuses the connection.
  const std::string url = "http://127.0.0.1:" + std::to_string(kpathd.port()) + "/metrics";
  CommandResult curl =
      RunCommand("curl -sv -o /dev/null -o /dev/null " + url + " " + url + " 2>&1");
  INFO(curl.output);
  CHECK(curl.status == 0);
  CHECK(curl.output.find("Re-using existing connection") != std::string::npos);
}

TEST_CASE("keep-alive: web.keep_alive_timeout 0s serves one request per connection",
          "[web][keep-alive]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 1s\nweb:\n  keep_alive_timeout: 0s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  Connection c(kpathd.port());
  const auto begin = Clock::now();
  REQUIRE(c.Send(KeepAliveRequest()));
  const std::string raw = c.ReadToClose(10s);  // closed by the server after one response
  CHECK(CompleteScrape(raw));
  CHECK(Clock::now() - begin < 5s);
}

TEST_CASE(
    "keep-alive: idle kept-alive clients hold at most half of the threads, and a scraper "
    "gets through",
    "[web][keep-alive][limits]") {
  REQUIRE(IsRoot());
  // 8 threads; every client scrapes once and then stays idle for the whole 60 s.
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 1s\nweb:\n  max_connections: 8\n"
                                       "  keep_alive_timeout: 60s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  std::vector<std::unique_ptr<Connection>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<Connection>(kpathd.port()));
    REQUIRE(idle.back()->Send(KeepAliveRequest()));
    CHECK(CompleteScrape(idle.back()->ReadResponse(10s)));
  }
  std::this_thread::sleep_for(300ms);
  int kept = 0;
  for (auto& c : idle) kept += c->ClosedByServer() ? 0 : 1;
  std::cout << "[web] 8 clients idle after one scrape each, max_connections 8: " << kept
            << " kept alive\n";
  CHECK(kept >= 1);
  CHECK(kept <= 4);
  // The scraper (and the one after it) gets its thread at once, not after keep_alive_timeout.
  for (int i = 0; i < 2; ++i) {
    const auto begin = Clock::now();
    Connection scrape(kpathd.port());
    REQUIRE(scrape.Send(KeepAliveRequest()));
    const std::string raw = scrape.ReadResponse(10s);
    const double took = Seconds(Clock::now() - begin);
    std::cout << "[web] scrape behind " << kept << " idle kept-alive connections: " << took * 1000
              << " ms\n";
    CHECK(CompleteScrape(raw));
    CHECK(took < 2.0);
  }
}

TEST_CASE("64 concurrent scrapers all get 200 with complete bodies", "[web][limits]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 1s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  constexpr int kScrapers = 64;
  std::vector<std::string> responses(kScrapers);
  std::vector<double> latencies(kScrapers);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kScrapers; ++i) {
    threads.emplace_back([&, i] {
      Connection c(kpathd.port());
      ++ready;
      while (ready < kScrapers) std::this_thread::yield();  // all connected, then all at once
      const auto begin = Clock::now();
      if (c.Send(Request())) responses[i] = c.ReadToClose(10s);
      latencies[i] = Seconds(Clock::now() - begin);
    });
  }
  for (std::thread& t : threads) t.join();
  int complete = 0;
  for (const std::string& r : responses) complete += CompleteScrape(r) ? 1 : 0;
  std::cout << "[web] " << kScrapers << " concurrent scrapers: " << complete
            << " complete 200s, slowest "
            << *std::max_element(latencies.begin(), latencies.end()) * 1000 << " ms, body "
            << responses[0].size() << " bytes\n";
  CHECK(complete == kScrapers);
}

TEST_CASE("a client sending its headers byte by byte is cut off by request_timeout",
          "[web][limits]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 1s\nweb:\n  request_timeout: 2s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  Connection slow(kpathd.port());
  const auto begin = Clock::now();
  const std::string request = Request("X-Slow: " + std::string(200, 's') + "\r\n");
  size_t sent = 0;
  // A byte every 100 ms: the 230-byte request would take 23 s.
  while (sent < request.size() && Clock::now() - begin < 10s) {
    if (slow.ClosedByServer() || !slow.Send(request.substr(sent, 1))) break;
    ++sent;
    std::this_thread::sleep_for(100ms);
  }
  const double took = Seconds(Clock::now() - begin);
  std::cout << "[web] slowloris client cut off after " << took << " s, " << sent << " of "
            << request.size() << " bytes sent\n";
  CHECK(sent < request.size());
  CHECK(took >= 1.5);
  CHECK(took < 4.0);
  CHECK(HttpGet(kpathd.port(), "/metrics"));  // others were served all along
}

TEST_CASE("a request over 16 KiB is refused and one just under it is served", "[web][limits]") {
  REQUIRE(IsRoot());
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 1s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  auto padded = [&](size_t bytes) {
    Connection c(kpathd.port());
    c.Send(Request("X-Padding: " + std::string(bytes, 'a') + "\r\n"));
    return c.ReadToClose(5s);
  };
  CHECK(CompleteScrape(padded(16000)));
  // civetweb 1.15 answers a request that does not fit max_request_size with 400.
  const std::string reply = padded(64 << 10);
  INFO(reply.substr(0, 300));
  CHECK(reply.starts_with("HTTP/1.0 400 Bad Request"));
  CHECK(reply.find("kpath_build_info") == std::string::npos);
  std::cout << "[web] a 64 KiB request: " << reply.substr(0, reply.find('\r')) << "\n";
  CHECK(HttpGet(kpathd.port(), "/metrics"));
}

TEST_CASE("basic auth: no credentials 401, wrong 401, right 200, and SIGHUP changes the password",
          "[web][auth]") {
  REQUIRE(IsRoot());
  TempDir dir;
  const std::string web =
      dir.Write("web.yml", "basic_auth_users:\n  prometheus: " + BcryptHash("s3cret") + "\n");
  KpathdProcess kpathd(
      {.args = {"--web.config.file=" + web}, .config_yaml = "sampling_interval: 1s\n"});
  const std::string right = BasicAuth("prometheus", "s3cret");
  REQUIRE(WaitUntil(
      [&] {
        auto r = HttpGet(kpathd.port(), "/metrics", 2s, right);
        return r && r->status == 200 && r->body.find("kpath_build_info") != std::string::npos;
      },
      20s));

  auto none = HttpGet(kpathd.port(), "/metrics");
  REQUIRE(none);
  CHECK(none->status == 401);
  CHECK(none->headers.find("WWW-Authenticate: Basic realm=\"kpathd\"") != std::string::npos);
  CHECK(none->body.find("kpath_") == std::string::npos);
  auto wrong = HttpGet(kpathd.port(), "/metrics", 5s, BasicAuth("prometheus", "guess"));
  REQUIRE(wrong);
  CHECK(wrong->status == 401);
  auto stranger = HttpGet(kpathd.port(), "/metrics", 5s, BasicAuth("mallory", "s3cret"));
  REQUIRE(stranger);
  CHECK(stranger->status == 401);
  auto good = HttpGet(kpathd.port(), "/metrics", 5s, right);
  REQUIRE(good);
  CHECK(good->status == 200);
  CHECK(good->body.find("kpath_build_info") != std::string::npos);
  // /-/healthy and /-/ready take the same credentials (exporter-toolkit protects every path).
  for (const char* path : {"/-/healthy", "/-/ready"}) {
    INFO(path);
    auto anonymous = HttpGet(kpathd.port(), path);
    REQUIRE(anonymous);
    CHECK(anonymous->status == 401);
    CHECK(anonymous->headers.find("WWW-Authenticate: Basic realm=\"kpathd\"") != std::string::npos);
    CHECK(anonymous->body.find("ready") == std::string::npos);
    auto guessed = HttpGet(kpathd.port(), path, 5s, BasicAuth("prometheus", "guess"));
    REQUIRE(guessed);
    CHECK(guessed->status == 401);
    auto allowed = HttpGet(kpathd.port(), path, 5s, right);
    REQUIRE(allowed);
    CHECK(allowed->status == 200);
  }

  // 64 scrapers at once with the right password: bcrypt runs once, the rest hit the cache.
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  const auto begin = Clock::now();
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&] {
      auto r = HttpGet(kpathd.port(), "/metrics", 10s, right);
      ok += r && r->status == 200 ? 1 : 0;
    });
  }
  for (std::thread& t : threads) t.join();
  std::cout << "[web] 64 concurrent scrapers with basic auth: " << ok << " x 200 in "
            << Seconds(Clock::now() - begin) * 1000 << " ms\n";
  CHECK(ok == 64);

  // SIGHUP re-reads the file: the new password works at once, the old one no longer.
  dir.Write("web.yml", "basic_auth_users:\n  prometheus: " + BcryptHash("n3w") + "\n");
  kpathd.Signal(SIGHUP);
  REQUIRE(WaitUntil(
      [&] {
        auto r = HttpGet(kpathd.port(), "/metrics", 2s, BasicAuth("prometheus", "n3w"));
        return r && r->status == 200;
      },
      5s));
  auto old = HttpGet(kpathd.port(), "/metrics", 5s, right);
  REQUIRE(old);
  CHECK(old->status == 401);
  // A broken file on SIGHUP is refused; the new password keeps working.
  dir.Write("web.yml", "basic_auth_users:\n  prometheus: plaintext\n");
  kpathd.Signal(SIGHUP);
  REQUIRE(WaitUntil(
      [&] { return kpathd.Output().find("configuration refused") != std::string::npos; }, 5s));
  auto still = HttpGet(kpathd.port(), "/metrics", 5s, BasicAuth("prometheus", "n3w"));
  REQUIRE(still);
  CHECK(still->status == 200);
}

TEST_CASE("TLS: a self-signed certificate, curl --cacert, min_version TLS13 refuses TLS 1.2",
          "[web][tls]") {
  REQUIRE(IsRoot());
  TempDir dir;
  Openssl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " +
          dir / "self.key" + " -out " + dir / "self.crt" +
          " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -days 1");
  dir.Write("web.yml",
            "tls_server_config:\n  cert_file: self.crt\n  key_file: self.key\n  "
            "min_version: TLS13\n");
  KpathdProcess kpathd(
      {.args = {"--web.config.file", dir / "web.yml"}, .config_yaml = "sampling_interval: 1s\n"});
  const std::string trust = "--cacert " + dir / "self.crt";
  REQUIRE(WaitUntil(
      [&] {
        CurlResult r = Curl(dir, kpathd.port(), trust);
        return r.http_status == 200 && r.body.find("kpath_build_info") != std::string::npos;
      },
      20s));
  CurlResult tls13 = Curl(dir, kpathd.port(), trust + " --tlsv1.3");
  CHECK(tls13.http_status == 200);
  // The health endpoints are served on the same TLS port only.
  CurlResult ready = Curl(dir, kpathd.port(), trust, "/-/ready");
  CHECK(ready.http_status == 200);
  CHECK(ready.body == "kpathd is ready.\n");
  CHECK(Curl(dir, kpathd.port(), trust, "/-/healthy").http_status == 200);
  CHECK(Curl(dir, kpathd.port(), "", "/-/healthy").exit_code == 60);
  // A client that speaks TLS 1.2 at most is refused in the handshake.
  CurlResult tls12 = Curl(dir, kpathd.port(), trust + " --tlsv1.2 --tls-max 1.2");
  CHECK(tls12.exit_code != 0);
  CHECK(tls12.http_status == 0);
  // Without trusting the certificate curl refuses it (60: peer certificate cannot be verified).
  CHECK(Curl(dir, kpathd.port(), "").exit_code == 60);
  // Plain HTTP on the TLS port gets no metrics.
  auto plain = HttpGet(kpathd.port(), "/metrics", 3s);
  CHECK((!plain || plain->body.find("kpath_build_info") == std::string::npos));
  CHECK(kpathd.Output().find("ready, serving https://127.0.0.1:" + std::to_string(kpathd.port()) +
                             "/metrics") != std::string::npos);
}

// Without --url, `kpathd events` and `kpathd diagnose` find the kpathd of a configuration over
// https and trust its own certificate, pinned: here one that names the node only, while they
// reach it at 127.0.0.1 (docs/events.md).
TEST_CASE(
    "kpathd events and diagnose reach a TLS kpathd from its configuration, its certificate "
    "pinned",
    "[web][tls][events]") {
  REQUIRE(IsRoot());
  TempDir dir;
  Openssl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " +
          dir / "node.key" + " -out " + dir / "node.crt" +
          " -subj /CN=node-7.example -addext subjectAltName=DNS:node-7.example -days 1");
  dir.Write("web.yml", "tls_server_config:\n  cert_file: node.crt\n  key_file: node.key\n");
  KpathdProcess kpathd(
      {.args = {"--web.config.file", dir / "web.yml"}, .config_yaml = "sampling_interval: 1s\n"});
  const std::string port = std::to_string(kpathd.port());
  const std::string config =
      " --config " +
      dir.Write("client.yaml", "listen_address: 0.0.0.0:" + port +
                                   "\nweb:\n  config_file: " + dir / "web.yml" + "\n");
  CommandResult events;
  const bool served = WaitUntil(
      [&] {
        events = RunCommand(KpathdBinary() + " events" + config + " 2>&1");
        return events.status == 0;
      },
      30s);
  INFO(events.output);
  INFO(kpathd.Output());
  CHECK(served);
  // The same certificate as a CA for https://127.0.0.1 is refused: it does not name 127.0.0.1.
  CommandResult by_url = RunCommand(KpathdBinary() + " events --url https://127.0.0.1:" + port +
                                    " --ca-file " + dir / "node.crt" + " 2>&1");
  INFO(by_url.output);
  CHECK(by_url.status == 1);
  CHECK(by_url.output.find("TLS handshake with 127.0.0.1:" + port) != std::string::npos);
  CHECK(by_url.output.find("IP address mismatch") != std::string::npos);
  // diagnose reads the running kpathd's events the same way (1 s watch; exit 0 or 1 by what it
  // finds on this host, not checked here).
  CommandResult diagnose =
      RunCommand(KpathdBinary() + " diagnose --duration 1s" + config + " 2>&1");
  INFO(diagnose.output);
  CHECK(diagnose.output.find("in the running kpathd's events (https://127.0.0.1:" + port +
                             "/events") != std::string::npos);
}

TEST_CASE("TLS: client certificates required and verified, and SIGHUP loads a new certificate",
          "[web][tls]") {
  REQUIRE(IsRoot());
  TempDir dir;
  MakeCertificates(dir);
  const std::string web_yml =
      "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: "
      "ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n";
  dir.Write("web.yml", web_yml);
  KpathdProcess kpathd(
      {.config_yaml = "sampling_interval: 1s\nweb:\n  config_file: " + dir / "web.yml" + "\n"});
  const std::string trust = "--cacert " + dir / "ca.crt";
  const std::string client = " --cert " + dir / "client.crt" + " --key " + dir / "client.key";
  const std::string rogue = " --cert " + dir / "rogue.crt" + " --key " + dir / "rogue.key";
  REQUIRE(WaitUntil(
      [&] {
        return Curl(dir, kpathd.port(), trust + client).body.find("kpath_build_info") !=
               std::string::npos;
      },
      20s));
  CurlResult verified = Curl(dir, kpathd.port(), trust + client);
  CHECK(verified.http_status == 200);
  CHECK(verified.body.find("kpath_build_info") != std::string::npos);
  CHECK(Curl(dir, kpathd.port(), trust).http_status == 0);          // no client certificate
  CHECK(Curl(dir, kpathd.port(), trust + rogue).http_status == 0);  // one no CA vouches for
  // TLS 1.2 as well (the default min_version), with the same policy.
  CHECK(Curl(dir, kpathd.port(), trust + client + " --tls-max 1.2").http_status == 200);
  CHECK(Curl(dir, kpathd.port(), trust + " --tls-max 1.2").http_status == 0);

  // VerifyClientCertIfGiven by SIGHUP: no certificate passes, an unverifiable one still fails.
  dir.Write("web.yml", std::string(web_yml).replace(web_yml.find("RequireAndVerifyClientCert"), 26,
                                                    "VerifyClientCertIfGiven"));
  kpathd.Signal(SIGHUP);
  REQUIRE(WaitUntil([&] { return Curl(dir, kpathd.port(), trust).http_status == 200; }, 5s));
  CHECK(Curl(dir, kpathd.port(), trust + rogue).http_status == 0);
  CHECK(Curl(dir, kpathd.port(), trust + client).http_status == 200);

  // A new self-signed certificate by SIGHUP: the next connection presents it.
  Openssl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " +
          dir / "new.key" + " -out " + dir / "new.crt" +
          " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -days 1");
  dir.Write("web.yml", "tls_server_config:\n  cert_file: new.crt\n  key_file: new.key\n");
  kpathd.Signal(SIGHUP);
  REQUIRE(WaitUntil(
      [&] { return Curl(dir, kpathd.port(), "--cacert " + dir / "new.crt").http_status == 200; },
      5s));
  CHECK(Curl(dir, kpathd.port(), trust + client).exit_code == 60);  // the old CA no longer fits
}

TEST_CASE("a bad web configuration ends kpathd at start with file, line and key", "[web][config]") {
  TempDir dir;
  const std::string web = dir.Write("web.yml",
                                    "tls_server_config:\n  cert_file: a.crt\n  "
                                    "key_file: a.key\n  ciphers: [x]\n");
  KpathdProcess unknown({.args = {"--web.config.file=" + web}});
  CHECK(unknown.WaitExit(10s) == 2);
  CHECK(unknown.Output().find(web + ":4: unknown key \"ciphers\" in \"tls_server_config\"") !=
        std::string::npos);

  dir.Write("web.yml", "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n");
  KpathdProcess missing({.args = {"--web.config.file=" + web}});
  CHECK(missing.WaitExit(10s) == 2);
  CHECK(missing.Output().find(web + ":2: tls_server_config.cert_file: open " + dir / "a.crt" +
                              ": No such file or directory") != std::string::npos);
  // kpathd --check-config checks the web configuration file that kpathd.yaml names.
  const std::string yaml = dir.Write("kpathd.yaml", "web:\n  config_file: " + web + "\n");
  CommandResult check = RunCommand(KpathdBinary() + " --check-config " + yaml);
  CHECK(check.status == 1);
  CHECK(check.output.find(web + ":2: tls_server_config.cert_file: open ") != std::string::npos);
}

// kpathd events over https (docs/events.md): against the real kpathd's TLS web configuration,
// with client certificates required and basic auth, as an SRE runs it on a hardened node. The
// events it prints are the ones curl reads from /events with the same credentials.
TEST_CASE("kpathd events over https: --ca-file, --insecure, --cert/--key, --user and --netrc-file",
          "[web][tls][events]") {
  REQUIRE(IsRoot());
  TempDir dir;
  MakeCertificates(dir);
  dir.Write("web.yml",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
            "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n"
            "basic_auth_users:\n  prometheus: " +
                BcryptHash("s3cret") + "\n");
  // An event to read: a madvise storm of a process of the test's (a storm from 1 call/s; the
  // tracepoint mechanism too, for kernels whose madvise has neither fentry nor kprobes).
  KpathdProcess kpathd({.config_yaml = "sampling_interval: 300ms\nmadvise:\n  "
                                       "storm_calls_per_second: 1\nprobes:\n  madvise:\n    "
                                       "mechanisms: [fentry, kprobe, tracepoint]\nweb:\n  "
                                       "config_file: " +
                                       dir / "web.yml" + "\n"});
  const std::string base = KpathdBinary() + " events --json --kind madvise_storm_start";
  const std::string url = " --url https://127.0.0.1:" + std::to_string(kpathd.port());
  const std::string ca = " --ca-file " + dir / "ca.crt";
  const std::string client = " --cert " + dir / "client.crt" + " --key " + dir / "client.key";
  const std::string user = " --user prometheus:s3cret";
  const std::string curl_auth = "--cacert " + dir / "ca.crt" + " --cert " + dir / "client.crt" +
                                " --key " + dir / "client.key" + " -u prometheus:s3cret";
  // Served, with the madvise probe attached (it attaches after the server starts).
  REQUIRE(WaitUntil(
      [&] {
        const std::string body = Curl(dir, kpathd.port(), curl_auth).body;
        const size_t at = body.find("kpath_probe_attached{probe=\"madvise\"");
        return at != std::string::npos && body.substr(body.find('\n', at) - 2, 2) == " 1";
      },
      30s));
  constexpr const char* kComm = "kpath-tls-ev";
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    prctl(PR_SET_NAME, kComm, 0, 0, 0);
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 400; ++i) {
      madvise(page, 4096, MADV_NORMAL);
      usleep(5000);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  // The lines of the test's process (kpathd's own threads may storm too at 1 call/s).
  auto ours = [&](const std::string& output) {
    std::string out;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);) {
      if (line.find(std::string("\"comm\":\"") + kComm + "\"") != std::string::npos)
        out += line + "\n";
    }
    return out;
  };
  CommandResult read;
  const bool seen = WaitUntil(
      [&] {
        read = RunCommand(base + url + ca + client + user);
        return read.status == 0 && read.output.find(kComm) != std::string::npos;
      },
      20s);
  INFO(kpathd.Output());
  INFO(read.output);
  REQUIRE(seen);
  // The same lines as /events holds (format=lines, the header dropped), read by curl.
  CurlResult events =
      Curl(dir, kpathd.port(), curl_auth, "'/events?format=lines&kind=madvise_storm_start'");
  REQUIRE(events.http_status == 200);
  CHECK(ours(events.body) == ours(read.output));
  std::cout << "[web] kpathd events over https: " << read.output.substr(0, read.output.find('\n'))
            << "\n";

  // --insecure instead of the CA; a netrc file instead of --user.
  CHECK(ours(RunCommand(base + url + " --insecure" + client + user).output) == ours(read.output));
  dir.Write("netrc", "machine 127.0.0.1 login prometheus password s3cret\n");
  CHECK(ours(RunCommand(base + url + ca + client + " --netrc-file " + dir / "netrc").output) ==
        ours(read.output));
  // Refused, each with its reason and exit 1.
  auto refused = [&](const std::string& args, const std::string& reason, int exit_status = 1) {
    CommandResult r = RunCommand(base + args);
    INFO(args << ": " << r.output);
    CHECK(r.status == exit_status);
    CHECK(r.output.find(reason) != std::string::npos);
  };
  // The server's certificate against the system's CAs: not trusted.
  refused(url + client + user, "--ca-file FILE to trust its CA");
  // A name the certificate does not hold (it holds IP:127.0.0.1 only).
  refused(" --url https://localhost:" + std::to_string(kpathd.port()) + ca + client + user,
          "TLS handshake with localhost:");
  // No client certificate, or one no CA vouches for.
  refused(url + ca + user, "client certificate");
  refused(url + ca + " --cert " + dir / "rogue.crt" + " --key " + dir / "rogue.key" + user,
          "127.0.0.1:");
  // The wrong password, or none.
  refused(url + ca + client + " --user prometheus:wrong", "HTTP 401");
  refused(url + ca + client, "HTTP 401");
  // Plain HTTP to a TLS port; TLS options without https; half a client certificate.
  refused(" --url http://127.0.0.1:" + std::to_string(kpathd.port()) + user, "127.0.0.1:");
  refused(" --url http://127.0.0.1:" + std::to_string(kpathd.port()) + ca, "go with an https://");
  refused(url + " --cert " + dir / "client.crt", "--cert and --key go together", 2);

  // Without --url: where the configuration (kpathd.yaml, as the service reads it) says kpathd
  // listens, over https since its web configuration has TLS, trusting kpathd's own certificate
  // (no --ca-file).
  const std::string config =
      " --config " +
      dir.Write("client.yaml", "listen_address: 127.0.0.1:" + std::to_string(kpathd.port()) +
                                   "\nweb:\n  config_file: " + dir / "web.yml" + "\n");
  CHECK(ours(RunCommand(base + config + client + user).output) == ours(read.output));
  // Its basic auth cannot come from the configuration (it holds hashes): a 401 says which file
  // asks for it.
  refused(config + client, "web.yml asks for basic auth: --user USER:PASSWORD or --netrc-file");
  refused(config + user, "web.yml asks for a client certificate: --cert FILE --key FILE");
  // --ca-file still overrides the pinned certificate (here with a CA that did not sign it).
  refused(config + " --ca-file " + dir / "rogue.crt" + client + user, "--ca-file FILE to trust");

  // diagnose reads the running kpathd's events with the same options (1 s watches; exit 0 or 1
  // by what it finds on this host, not checked here).
  const std::string diagnose = KpathdBinary() + " diagnose --duration 1s" + config;
  const std::string from_kpathd =
      "in the running kpathd's events (https://127.0.0.1:" + std::to_string(kpathd.port()) +
      "/events";
  CommandResult with = RunCommand(diagnose + client + user + " 2>&1");
  INFO(with.output);
  CHECK(with.output.find(from_kpathd) != std::string::npos);
  CHECK(with.output.find("could not be read") == std::string::npos);
  // Without --user, the watch's own events, and the report and a warning say why.
  CommandResult without = RunCommand(diagnose + client + " 2>&1");
  INFO(without.output);
  CHECK(without.output.find(from_kpathd) == std::string::npos);
  CHECK(without.output.find("in this watch (the running kpathd's could not be read: HTTP 401") !=
        std::string::npos);
  CHECK(without.output.find("web.yml asks for basic auth: --user USER:PASSWORD") !=
        std::string::npos);
  CHECK(without.output.find("warning: diagnose: the running kpathd's events could not be read") !=
        std::string::npos);
  // A malformed option ends it before the watch, with exit 2.
  CommandResult bad = RunCommand(diagnose + client + " --user prometheus 2>&1");
  INFO(bad.output);
  CHECK(bad.status == 2);
  CHECK(bad.output.find("kpathd diagnose: --user USER:PASSWORD") != std::string::npos);
}
