// kpath-bench-scrape: scrapes http://127.0.0.1:PORT/metrics COUNT times, one connection each,
// with the headers Prometheus 2.42 sends, and prints one line per scrape:
//     <seconds> <bytes received> <content-encoding or identity>
// Timed from connect() to the last byte (the server closes: "Connection: close"), so the figure
// is what a scraper waits for, without the start-up cost of a client process or interpreter.
//
//   kpath-bench-scrape --port P [--count N] [--identity] [--path /metrics]
//
// --identity leaves out "Accept-Encoding: gzip" (Prometheus sends it; a server may compress).
// Exits 1 on a connection error or a status other than 200.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Scrape {
  double seconds = 0;
  size_t bytes = 0;
  std::string encoding = "identity";
};

bool ScrapeOnce(int port, const std::string& request, Scrape& out, std::string& error) {
  auto start = std::chrono::steady_clock::now();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    error = std::string("connect: ") + std::strerror(errno);
    close(fd);
    return false;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    error = std::string("send: ") + std::strerror(errno);
    close(fd);
    return false;
  }
  std::string head;  // the status line and headers, kept until the blank line is seen
  bool head_done = false;
  size_t total = 0;
  static char buffer[1 << 16];
  for (;;) {
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = std::string("recv: ") + std::strerror(errno);
      close(fd);
      return false;
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
    if (!head_done) {
      head.append(buffer, static_cast<size_t>(std::min<ssize_t>(n, 8192)));
      head_done = head.find("\r\n\r\n") != std::string::npos || head.size() > 16384;
    }
  }
  close(fd);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.bytes = total;
  if (head.compare(0, 12, "HTTP/1.1 200") != 0 && head.compare(0, 12, "HTTP/1.0 200") != 0) {
    error = "status: " + head.substr(0, head.find('\r'));
    return false;
  }
  for (const char* name : {"\r\nContent-Encoding: ", "\r\ncontent-encoding: "}) {
    size_t at = head.find(name);
    if (at != std::string::npos) {
      size_t from = at + std::strlen(name);
      out.encoding = head.substr(from, head.find('\r', from) - from);
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  int count = 1;
  bool gzip = true;
  std::string path = "/metrics";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (a == "--count" && i + 1 < argc) {
      count = std::atoi(argv[++i]);
    } else if (a == "--identity") {
      gzip = false;
    } else if (a == "--path" && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s --port P [--count N] [--identity] [--path /metrics]\n",
                   argv[0]);
      return 2;
    }
  }
  if (port <= 0) {
    std::fprintf(stderr, "%s: --port is required\n", argv[0]);
    return 2;
  }
  // What Prometheus 2.42 sends when it scrapes a target.
  std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
      "\r\nUser-Agent: Prometheus/2.42.0\r\n"
      "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
      "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n" +
      (gzip ? "Accept-Encoding: gzip\r\n" : "") +
      "X-Prometheus-Scrape-Timeout-Seconds: 10\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < count; ++i) {
    Scrape s;
    std::string error;
    if (!ScrapeOnce(port, request, s, error)) {
      std::fprintf(stderr, "kpath-bench-scrape: port %d: %s\n", port, error.c_str());
      return 1;
    }
    std::printf("%.9f %zu %s\n", s.seconds, s.bytes, s.encoding.c_str());
  }
  return 0;
}
