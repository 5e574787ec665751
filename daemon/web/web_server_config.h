// kpathd.yaml's `web:` section: how the /metrics server accepts connections (read by
// daemon/config.cpp with the rest of kpathd.yaml).
#pragma once

#include <string>

#include "absl/time/time.h"

namespace kpath {

// The /metrics HTTP server (civetweb), see docs/securing-metrics.md.
struct WebServerConfig {
  // exporter-toolkit web configuration (TLS, basic auth; web_config.h). Empty: plain
  // HTTP without authentication.
  std::string config_file;
  // Connections served at once, one civetweb thread each. An idle or slow client holds one until
  // request_timeout, so this many idle connections are needed to delay a scrape at all.
  int max_connections = 128;
  // Longest a client may take to send its request (headers included) or to take the response.
  absl::Duration request_timeout = absl::Seconds(5);
  // How long a connection is kept open for the client's next request (HTTP keep-alive); zero:
  // one request per connection. Longer than Prometheus's usual scrape intervals (15 s to 1 min),
  // so that it scrapes over one connection. Idle kept-alive connections never hold more than
  // half of the max_connections threads (metrics_server.cpp).
  absl::Duration keep_alive_timeout = absl::Seconds(75);
  bool operator==(const WebServerConfig&) const = default;
};

}  // namespace kpath
