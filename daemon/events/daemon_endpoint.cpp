#include "daemon/events/daemon_endpoint.h"

#include <unistd.h>

#include "daemon/web/web_config.h"

namespace kpath {

absl::StatusOr<DaemonEndpoint> DaemonEndpointFor(const std::string& listen_address,
                                                 const WebServerConfig& web) {
  DaemonEndpoint out;
  out.url = DefaultEventsUrl(listen_address);
  if (web.config_file.empty()) return out;
  absl::StatusOr<WebConfig> file = LoadWebConfigFile(web.config_file);
  if (!file.ok()) return file.status();
  out.web_config_file = web.config_file;
  out.basic_auth = !file->basic_auth_users.empty();
  if (!file->tls) return out;
  out.url.tls = true;
  out.client_cert_required = file->tls->client_auth == ClientAuth::kRequireAnyClientCert ||
                             file->tls->client_auth == ClientAuth::kRequireAndVerifyClientCert;
  const std::string& cert = file->tls->cert_file.path;
  if (!cert.empty() && access(cert.c_str(), R_OK) == 0) {
    out.tls.ca_file = cert;
    out.tls.pinned = true;
  }
  return out;
}

}  // namespace kpath
