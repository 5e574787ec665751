// kpathd's /-/healthy and /-/ready, as Prometheus and its exporters name them. /-/healthy: the
// process serves HTTP. /-/ready: kpathd finished starting its probes and the snapshot it serves
// is fresh; otherwise 503 with a one-line reason. Both sit behind the same TLS and basic auth as
// /metrics (the exporter-toolkit's practice: its web configuration protects every path),
// docs/securing-metrics.md says how a kubelet or a load balancer probes them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kpath {

// Why kpathd is not ready ("" when it is); called on a civetweb thread, so it must not block.
using ReadinessCheck = std::function<std::string()>;

struct HealthReply {
  int status = 200;
  std::string body;        // one line, ending in "\n" (a JSON document for /events)
  bool challenge = false;  // 401: ask for basic auth (WWW-Authenticate)
  std::string content_type = "text/plain; charset=utf-8";
};

// The answer to a request for `path` (the URI without its query), or nullopt when `path` is not
// a health endpoint. `authorized`: the request passed basic auth (true when none is required).
// A null `readiness` is always ready.
std::optional<HealthReply> HealthEndpointReply(std::string_view path, std::string_view method,
                                               bool authorized, const ReadinessCheck& readiness);

class EventRing;
// The answer to GET /events?<query> (events_query.h): 200 with JSON, 400 naming what is wrong
// in the query, 401 and 405 as the health endpoints.
HealthReply EventsEndpointReply(const EventRing& events, std::string_view method,
                                std::string_view query, bool authorized);

// The user and password of an "Authorization: Basic ..." header value; nullopt when it is not
// one.
struct BasicCredentials {
  std::string user;
  std::string password;
};
std::optional<BasicCredentials> ParseBasicAuthorization(std::string_view header_value);

}  // namespace kpath
