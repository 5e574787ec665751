// /-/healthy and /-/ready: which request gets which status, and the Authorization header they
// check (the real server answers them in tests/integration/health_endpoints_test.cpp).
#include "daemon/web/health_endpoints.h"

#include <catch2/catch.hpp>

namespace kpath {
namespace {

const ReadinessCheck kReady = [] { return std::string(); };
const ReadinessCheck kStarting = [] { return std::string("starting"); };

TEST_CASE("health endpoints: healthy always, ready only when the check says so", "[health]") {
  CHECK_FALSE(HealthEndpointReply("/metrics", "GET", true, kReady));
  CHECK_FALSE(HealthEndpointReply("/-/healthz", "GET", true, kReady));
  CHECK_FALSE(HealthEndpointReply("/-/ready/", "GET", true, kReady));

  auto healthy = HealthEndpointReply("/-/healthy", "GET", true, kStarting);
  REQUIRE(healthy);
  CHECK(healthy->status == 200);
  CHECK(healthy->body == "kpathd is healthy.\n");

  auto ready = HealthEndpointReply("/-/ready", "HEAD", true, kReady);
  REQUIRE(ready);
  CHECK(ready->status == 200);
  CHECK(HealthEndpointReply("/-/ready", "GET", true, nullptr)->status == 200);

  auto starting = HealthEndpointReply("/-/ready", "GET", true, kStarting);
  REQUIRE(starting);
  CHECK(starting->status == 503);
  CHECK(starting->body == "kpathd is not ready: starting\n");
}

TEST_CASE("health endpoints: unauthorized 401 with a challenge, other methods 405", "[health]") {
  for (const char* path : {"/-/healthy", "/-/ready"}) {
    auto denied = HealthEndpointReply(path, "GET", false, kReady);
    REQUIRE(denied);
    CHECK(denied->status == 401);
    CHECK(denied->challenge);
    auto post = HealthEndpointReply(path, "POST", true, kReady);
    REQUIRE(post);
    CHECK(post->status == 405);
  }
}

TEST_CASE("basic credentials from an Authorization header", "[health]") {
  // "prometheus:s3:cret": the password may hold a colon, the user may not.
  auto c = ParseBasicAuthorization("Basic cHJvbWV0aGV1czpzMzpjcmV0");
  REQUIRE(c);
  CHECK(c->user == "prometheus");
  CHECK(c->password == "s3:cret");
  CHECK(ParseBasicAuthorization("basic  cHJvbWV0aGV1czpzMzpjcmV0 "));
  CHECK_FALSE(ParseBasicAuthorization("Bearer cHJvbWV0aGV1czpzMzpjcmV0"));
  CHECK_FALSE(ParseBasicAuthorization("Basic !!!"));
  CHECK_FALSE(ParseBasicAuthorization("Basic bm9jb2xvbg=="));  // "nocolon"
  CHECK_FALSE(ParseBasicAuthorization(""));
}

}  // namespace
}  // namespace kpath
