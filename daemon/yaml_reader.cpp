#include "daemon/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "probes/kernel/text.h"  // header-only: no link to kpath_kernel

namespace kpath {
namespace {

// Where a YAML text has content and where a second document starts (1-based lines; 0: none).
// yaml-cpp 0.7's LoadAll can loop forever, allocating, on some malformed input (found by the
// config fuzzer: ",sms: [kprobe]C"), so the text is loaded as one document with YAML::Load and
// a second document is found by its "---" or "..." marker line instead.
struct DocumentScan {
  int first_content_line = 0;
  int second_document_line = 0;
};

DocumentScan ScanDocuments(std::string_view text) {
  DocumentScan scan;
  bool ended = false;  // a "..." closed the first document
  int line_no = 0;
  for (std::string_view line : text::Lines(text)) {
    ++line_no;
    std::string_view trimmed = line.substr(0, line.find('#'));
    while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back())))
      trimmed.remove_suffix(1);
    if (trimmed.empty() || trimmed.front() == '%') continue;
    bool start_marker = trimmed.starts_with("---");
    bool end_marker = trimmed.starts_with("...");
    if ((start_marker && scan.first_content_line) || (ended && !end_marker)) {
      scan.second_document_line = line_no;
      return scan;
    }
    if (end_marker) {
      ended = scan.first_content_line != 0;
      continue;
    }
    std::string_view rest = start_marker ? trimmed.substr(3) : trimmed;
    while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front())))
      rest.remove_prefix(1);
    if (!rest.empty() && rest != "~" && rest != "null" && !scan.first_content_line) {
      scan.first_content_line = line_no;
    }
  }
  return scan;
}

}  // namespace

std::string JoinNames(std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string KeyPath(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

YamlReader::YamlReader(std::string_view source, YamlFormat format)
    : source_(source), format_(std::move(format)) {}

absl::Status YamlReader::ReadDocument(
    std::string_view text, const std::function<absl::Status(const YAML::Node& root)>& read) const {
  const DocumentScan scan = ScanDocuments(text);
  if (scan.second_document_line) {
    return absl::InvalidArgumentError(
        fmt::format("{}:{}: expected one YAML document, found a second one starting here", source_,
                    scan.second_document_line));
  }
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    if (root.IsNull() && scan.first_content_line && format_.refuse_content_read_as_nothing) {
      // Text that yaml-cpp reads as nothing at all is not a configuration.
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: not YAML settings (the text does not parse as a mapping)", source_,
                      scan.first_content_line));
    }
    return read(root);
  } catch (const YAML::Exception& e) {
    return Error(e.mark, e.msg);
  }
}

absl::Status YamlReader::Error(const YAML::Mark& mark, std::string_view message) const {
  if (mark.is_null()) return absl::InvalidArgumentError(fmt::format("{}: {}", source_, message));
  return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source_, mark.line + 1, message));
}

std::string YamlReader::Describe(const YAML::Node& node) const {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return std::string(format_.null_shown);
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar: {
      constexpr size_t kMaxShown = 60;
      const std::string& text = node.Scalar();
      if (text.size() <= kMaxShown) return fmt::format("\"{}\"", text);
      return fmt::format("\"{}...\"", text.substr(0, kMaxShown));
    }
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

absl::Status YamlReader::ForEachKey(const YAML::Node& map, std::string_view path,
                                    const std::vector<std::string_view>& valid_keys,
                                    const KeyHandler& handler, std::string_view noun) const {
  const std::string where = path.empty() ? "" : fmt::format(" in \"{}\"", path);
  std::map<std::string, int, std::less<>> first_line_of_key;
  for (const auto& entry : map) {
    const YAML::Node& key_node = entry.first;
    if (!key_node.IsScalar()) {
      return Error(key_node.Mark(),
                   fmt::format("expected a setting name{}, got {}", where, Describe(key_node)));
    }
    const std::string& key = key_node.Scalar();
    if (std::find(valid_keys.begin(), valid_keys.end(), key) == valid_keys.end()) {
      const auto& refused = format_.refused_keys;
      if (std::find(refused.begin(), refused.end(), key) != refused.end()) {
        return Error(key_node.Mark(), fmt::format("{}: {} (supported{}: {})", KeyPath(path, key),
                                                  format_.refusal, where, JoinNames(valid_keys)));
      }
      return Error(key_node.Mark(), fmt::format("unknown {} \"{}\"{} (valid: {})", noun, key, where,
                                                JoinNames(valid_keys)));
    }
    const auto [previous, inserted] = first_line_of_key.emplace(key, key_node.Mark().line + 1);
    if (!inserted) {
      const std::string first = format_.duplicate_names_first_line
                                    ? fmt::format(" (first on line {})", previous->second)
                                    : "";
      return Error(key_node.Mark(), fmt::format("duplicate key \"{}\"{}{}", key, where, first));
    }
    if (absl::Status status = handler(key, key_node, entry.second); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status YamlReader::Section(const YAML::Node& key_node, const YAML::Node& value,
                                 std::string_view path,
                                 const std::vector<std::string_view>& valid_keys,
                                 const KeyHandler& handler, std::string_view noun) const {
  if (!value.IsMap() && !value.IsNull()) return Expected(key_node, value, path, "a mapping");
  return ForEachKey(value, path, valid_keys, handler, noun);
}

absl::Status YamlReader::Expected(const YAML::Node& key_node, const YAML::Node& value,
                                  std::string_view path, std::string_view expected) const {
  return Error(key_node.Mark(),
               fmt::format("{}: expected {}, got {}", path, expected, Describe(value)));
}

absl::StatusOr<std::string> YamlReader::Scalar(const YAML::Node& key_node, const YAML::Node& value,
                                               std::string_view path,
                                               std::string_view expected) const {
  if (!value.IsScalar()) return Expected(key_node, value, path, expected);
  return value.Scalar();
}

absl::Status YamlReader::Duration(const YAML::Node& key_node, const YAML::Node& value,
                                  std::string_view path, absl::Duration min, absl::Duration max,
                                  absl::Duration& out) const {
  constexpr std::string_view kExpected = "a duration such as 5s or 500ms";
  absl::StatusOr<std::string> text = Scalar(key_node, value, path, kExpected);
  if (!text.ok()) return text.status();
  absl::Duration duration;
  if (!absl::ParseDuration(*text, &duration)) return Expected(key_node, value, path, kExpected);
  if (duration < min || duration > max) {
    return Error(key_node.Mark(),
                 fmt::format("{}: must be from {} to {}, got {}", path, absl::FormatDuration(min),
                             absl::FormatDuration(max), *text));
  }
  out = duration;
  return absl::OkStatus();
}

absl::Status YamlReader::Int(const YAML::Node& key_node, const YAML::Node& value,
                             std::string_view path, int64_t min, int64_t max, int& out) const {
  constexpr std::string_view kExpected = "a whole number";
  absl::StatusOr<std::string> text = Scalar(key_node, value, path, kExpected);
  if (!text.ok()) return text.status();
  int64_t number = 0;
  if (!absl::SimpleAtoi(*text, &number)) return Expected(key_node, value, path, kExpected);
  if (number < min || number > max) {
    return Error(key_node.Mark(),
                 fmt::format("{}: must be from {} to {}, got {}", path, min, max, number));
  }
  out = static_cast<int>(number);
  return absl::OkStatus();
}

absl::Status YamlReader::Bool(const YAML::Node& key_node, const YAML::Node& value,
                              std::string_view path, bool& out) const {
  constexpr std::string_view kExpected = "true or false";
  absl::StatusOr<std::string> text = Scalar(key_node, value, path, kExpected);
  if (!text.ok()) return text.status();
  if (!YAML::convert<bool>::decode(value, out)) return Expected(key_node, value, path, kExpected);
  return absl::OkStatus();
}

absl::Status YamlReader::AbsolutePath(const YAML::Node& key_node, const YAML::Node& value,
                                      std::string_view path, std::string& out) const {
  constexpr std::string_view kExpected = "an absolute path";
  absl::StatusOr<std::string> text = Scalar(key_node, value, path, kExpected);
  if (!text.ok()) return text.status();
  if (!text->starts_with('/')) return Expected(key_node, value, path, kExpected);
  out = *std::move(text);
  return absl::OkStatus();
}

}  // namespace kpath
