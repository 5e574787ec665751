// Where the kpathd that a configuration describes answers, and how a client on its node reaches
// it: what `kpathd events` (without --url) and `kpathd diagnose` ask for the running kpathd's
// events. From kpathd.yaml's listen_address and its web configuration file (`web.config_file`,
// docs/securing-metrics.md), the same files the daemon serves by.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "daemon/events/events_client.h"
#include "daemon/web/web_server_config.h"

namespace kpath {

// The service's configuration (systemd/kpathd.service): `kpathd events` reads it, when it is there
// and readable, to find the running kpathd without --config or --url.
inline constexpr char kServiceConfigFile[] = "/etc/kpathd/kpathd.yaml";

struct DaemonEndpoint {
  EventsUrl url;  // https when the web configuration has tls_server_config
  // For https: the daemon's own certificate (its cert_file) as the one to trust, pinned
  // (EventsTls::pinned), when this user can read it; else the system's CAs.
  EventsTls tls;
  bool basic_auth = false;  // the web configuration has basic_auth_users
  // client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert: a client cannot do
  // without --cert, and is told so before it tries.
  bool client_cert_required = false;
  std::string web_config_file;  // the file these came from; empty: none (plain HTTP)
};

// The host: 127.0.0.1 for 0.0.0.0 or no host, ::1 for [::], else the listen address's host; the
// port: the listen address's (9477 without one). An error names a web configuration file that
// cannot be read or is not valid.
absl::StatusOr<DaemonEndpoint> DaemonEndpointFor(const std::string& listen_address,
                                                 const WebServerConfig& web);

}  // namespace kpath
