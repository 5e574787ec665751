// The text of a fixture file (a capture from a real kernel, under tests/fixtures/), for unit
// tests: the test fails, naming the file, if it cannot be read.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "probes/kernel/host_paths.h"

namespace kpath {

inline std::string ReadFixture(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  INFO(path.string() << ": " << (text.ok() ? "" : std::string(text.status().message())));
  REQUIRE(text.ok());
  return *text;
}

}  // namespace kpath
