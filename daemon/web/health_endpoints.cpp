#include "daemon/web/health_endpoints.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "daemon/events/events_query.h"

namespace kpath {
namespace {

// 405 for a method but GET and HEAD, 401 without the credentials asked for; nullopt: go on.
std::optional<HealthReply> Refusal(std::string_view method, bool authorized) {
  if (method != "GET" && method != "HEAD") return HealthReply{405, "only GET and HEAD\n"};
  if (!authorized) return HealthReply{401, "Unauthorized\n", /*challenge=*/true};
  return std::nullopt;
}

}  // namespace

std::optional<HealthReply> HealthEndpointReply(std::string_view path, std::string_view method,
                                               bool authorized, const ReadinessCheck& readiness) {
  const bool healthy = path == "/-/healthy";
  if (!healthy && path != "/-/ready") return std::nullopt;
  if (std::optional<HealthReply> refused = Refusal(method, authorized)) return refused;
  if (healthy) return HealthReply{200, "kpathd is healthy.\n"};
  std::string reason = readiness ? readiness() : std::string();
  if (!reason.empty()) return HealthReply{503, absl::StrCat("kpathd is not ready: ", reason, "\n")};
  return HealthReply{200, "kpathd is ready.\n"};
}

HealthReply EventsEndpointReply(const EventRing& events, std::string_view method,
                                std::string_view query, bool authorized) {
  if (std::optional<HealthReply> refused = Refusal(method, authorized)) return *refused;
  absl::StatusOr<EventsQuery> parsed = ParseEventsQuery(query, absl::Now());
  if (!parsed.ok())
    return HealthReply{400, absl::StrCat("/events: ", parsed.status().message(), "\n")};
  HealthReply reply{200, EventsReplyJson(events, *parsed)};
  reply.content_type = "application/json";
  return reply;
}

std::optional<BasicCredentials> ParseBasicAuthorization(std::string_view header_value) {
  // absl's string_view is not std's in Debian's abseil: trim and compare by hand.
  auto trim = [](std::string_view s) {
    while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front())))
      s.remove_prefix(1);
    while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back())))
      s.remove_suffix(1);
    return s;
  };
  header_value = trim(header_value);
  constexpr std::string_view kScheme = "basic ";
  if (header_value.size() < kScheme.size() ||
      absl::AsciiStrToLower(std::string(header_value.substr(0, kScheme.size()))) != kScheme) {
    return std::nullopt;
  }
  const std::string_view encoded = trim(header_value.substr(kScheme.size()));
  std::string decoded;
  if (!absl::Base64Unescape(absl::string_view(encoded.data(), encoded.size()), &decoded)) {
    return std::nullopt;
  }
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return BasicCredentials{decoded.substr(0, colon), decoded.substr(colon + 1)};
}

}  // namespace kpath
