// Shared by the configuration unit tests: parse YAML that must be accepted, or get the message
// of YAML that must be rejected (always an InvalidArgument naming kpathd.yaml and the line).
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "daemon/config.h"

namespace kpath::testing {

inline Config Parse(const std::string& yaml) {
  absl::StatusOr<Config> config = ParseConfig(yaml, "kpathd.yaml");
  INFO(yaml << (config.ok() ? "" : std::string(config.status().message())));
  REQUIRE(config.ok());
  return *config;
}

inline std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<Config> config = ParseConfig(yaml, "kpathd.yaml");
  INFO(yaml);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

}  // namespace kpath::testing
