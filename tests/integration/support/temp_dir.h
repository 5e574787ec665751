// Test support: a temporary directory, removed with everything in it when the test ends, pass
// or fail. Header-only, for unit and integration tests alike.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace kpath::testing {

class TempDir {
 public:
  TempDir() {
    std::string name = (std::filesystem::temp_directory_path() / "kpath-test-XXXXXX").string();
    if (!mkdtemp(name.data())) throw std::runtime_error("mkdtemp failed");
    path_ = name;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to `name` in the directory with `mode`; returns the file's path.
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0644) const {
    const std::string file = *this / name;
    std::ofstream(file, std::ios::trunc) << text;
    chmod(file.c_str(), mode);
    return file;
  }

 private:
  std::string path_;
};

}  // namespace kpath::testing
