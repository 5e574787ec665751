// Strict reading of a YAML settings file (kpathd.yaml, the web configuration): one document, a
// mapping of known keys, each set once, every value of the expected type and range. The first
// problem found is an InvalidArgument error "<source>:<line>: <what>" naming the setting by its
// dotted path ("labels.comm").
#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kpath {

// How a file's messages are worded where kpathd.yaml and the web configuration differ (their
// messages are pinned by tests and quoted in docs, so each keeps its own).
struct YamlFormat {
  // A null value in "expected X, got <this>".
  std::string_view null_shown = "nothing (null)";
  // "duplicate key "x" (first on line 3)": name the line of the first one.
  bool duplicate_names_first_line = true;
  // A text that yaml-cpp reads as nothing (no mapping, yet not only comments or "~") is an error;
  // false: it is an empty document.
  bool refuse_content_read_as_nothing = true;
  // Keys refused by name with `refusal` ("<path>: <refusal> (supported in "x": a, b)") rather
  // than as unknown: settings of the file's format that kpathd does not implement.
  std::vector<std::string_view> refused_keys = {};
  std::string_view refusal = {};
};

// "a, b, c".
std::string JoinNames(std::span<const std::string_view> names);

// "<parent>.<key>", or "<key>" at the top level: how a setting is named in messages.
std::string KeyPath(std::string_view parent, std::string_view key);

// Reads the YAML of one file, named `source` in its messages. The methods that read a value take
// the value's key node: errors point at the key's line (yaml-cpp marks an empty value at the
// token after it, which may be on the next line).
class YamlReader {
 public:
  explicit YamlReader(std::string_view source, YamlFormat format = {});

  // Loads `text` as one YAML document and calls `read` with its root (null for an empty text, or
  // one of only comments). A second document and yaml-cpp's errors are errors at their line.
  absl::Status ReadDocument(std::string_view text,
                            const std::function<absl::Status(const YAML::Node& root)>& read) const;

  // "<source>:<line>: <message>", or "<source>: <message>" for a null mark.
  absl::Status Error(const YAML::Mark& mark, std::string_view message) const;

  // What a node holds, for "expected X, got Y": a quoted scalar (cut at 60 characters), "a list",
  // "a mapping" or format.null_shown.
  std::string Describe(const YAML::Node& node) const;

  using KeyHandler = std::function<absl::Status(const std::string& key, const YAML::Node& key_node,
                                                const YAML::Node& value)>;
  // Calls `handler` for each entry of `map` once its key is known to be a name from `valid_keys`
  // and not repeated; `path` names the mapping ("" at the top level), `noun` what its keys are
  // ("key", "probe"). yaml-cpp keeps both entries of a repeated key (and lookups see only the
  // first), so repetitions are found here.
  absl::Status ForEachKey(const YAML::Node& map, std::string_view path,
                          const std::vector<std::string_view>& valid_keys,
                          const KeyHandler& handler, std::string_view noun = "key") const;

  // A section such as `paths:` (the value of `key_node`): a mapping, whose entries go to
  // `handler` as ForEachKey gives them, or nothing, which keeps the defaults.
  absl::Status Section(const YAML::Node& key_node, const YAML::Node& value, std::string_view path,
                       const std::vector<std::string_view>& valid_keys, const KeyHandler& handler,
                       std::string_view noun = "key") const;

  // The text of a scalar; anything else is "<path>: expected <expected>, got ...".
  absl::StatusOr<std::string> Scalar(const YAML::Node& key_node, const YAML::Node& value,
                                     std::string_view path, std::string_view expected) const;

  // "5s", "500ms": from `min` to `max`.
  absl::Status Duration(const YAML::Node& key_node, const YAML::Node& value, std::string_view path,
                        absl::Duration min, absl::Duration max, absl::Duration& out) const;
  absl::Status Int(const YAML::Node& key_node, const YAML::Node& value, std::string_view path,
                   int64_t min, int64_t max, int& out) const;
  absl::Status Bool(const YAML::Node& key_node, const YAML::Node& value, std::string_view path,
                    bool& out) const;
  absl::Status AbsolutePath(const YAML::Node& key_node, const YAML::Node& value,
                            std::string_view path, std::string& out) const;

  // One of the names of `table`: "<path>: expected one of A, B, got ..." otherwise.
  template <typename T, size_t N>
  absl::Status Choice(const YAML::Node& key_node, const YAML::Node& value, std::string_view path,
                      const std::array<std::pair<std::string_view, T>, N>& table, T& out) const {
    std::array<std::string_view, N> names;
    for (size_t i = 0; i < N; ++i) names[i] = table[i].first;
    const std::string expected = "one of " + JoinNames(names);
    absl::StatusOr<std::string> text = Scalar(key_node, value, path, expected);
    if (!text.ok()) return text.status();
    for (const auto& [name, choice] : table) {
      if (name == *text) {
        out = choice;
        return absl::OkStatus();
      }
    }
    return Expected(key_node, value, path, expected);
  }

  // "<path>: expected <expected>, got <value described>", at the key's line.
  absl::Status Expected(const YAML::Node& key_node, const YAML::Node& value, std::string_view path,
                        std::string_view expected) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  YamlFormat format_;
};

}  // namespace kpath
