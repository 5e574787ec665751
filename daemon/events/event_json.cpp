#include "daemon/events/event_json.h"

#include <cmath>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "fmt/format.h"

namespace kpath {
namespace {

// Length of the valid UTF-8 sequence at the start of `s` (0: not one), as RFC 3629 defines it
// (no overlong forms, no surrogates, nothing past U+10FFFF).
size_t Utf8SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

void AppendJsonString(std::string& out, std::string_view text) {
  out += '"';
  while (!text.empty()) {
    const char c = text.front();
    const size_t n = Utf8SequenceLength(text);
    if (n == 0) {
      out += "\\ufffd";
      text.remove_prefix(1);
      continue;
    }
    if (n == 1) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
            out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
          } else {
            out += c;
          }
      }
    } else {
      out.append(text.substr(0, n));
    }
    text.remove_prefix(n);
  }
  out += '"';
}

void AppendValue(std::string& out, const EventField& field) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          AppendJsonString(out, v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out += std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          // JSON has no NaN or infinity.
          out += std::isfinite(v) ? fmt::format("{}", v) : std::string("null");
        } else {
          out += '[';
          for (size_t i = 0; i < v.size(); ++i) {
            if (i > 0) out += ',';
            AppendJsonString(out, v[i]);
          }
          out += ']';
        }
      },
      field.value);
}

}  // namespace

std::string JsonString(std::string_view text) {
  std::string out;
  AppendJsonString(out, text);
  return out;
}

std::string Rfc3339(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", time, absl::UTCTimeZone());
}

std::string EventJson(const StoredEvent& stored) {
  const Event& e = stored.event;
  std::string out =
      fmt::format("{{\"seq\":{},\"time\":\"{}\",\"kind\":", stored.seq, Rfc3339(e.time));
  AppendJsonString(out, e.kind);
  out += ",\"message\":";
  AppendJsonString(out, e.message);
  for (const EventField& field : e.fields) {
    out += ',';
    AppendJsonString(out, field.key);
    out += ':';
    AppendValue(out, field);
  }
  out += '}';
  return out;
}

std::optional<std::string> JsonField(std::string_view line, std::string_view key) {
  // kpathd writes no space and no nested object before the keys read here.
  const std::string needle = fmt::format("\"{}\":", key);
  const size_t at = line.find(needle);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view v = line.substr(at + needle.size());
  if (v.empty()) return std::nullopt;
  if (v[0] != '"') {
    const size_t end = v.find_first_of(",}]");
    return std::string(v.substr(0, end));
  }
  std::string out;
  for (size_t i = 1; i < v.size(); ++i) {
    char c = v[i];
    if (c == '"') return out;
    if (c != '\\' || i + 1 >= v.size()) {
      out += c;
      continue;
    }
    c = v[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'u': {
        unsigned code = 0;
        if (i + 4 >= v.size() || !absl::SimpleHexAtoi(std::string(v.substr(i + 1, 4)), &code)) {
          return std::nullopt;
        }
        i += 4;
        // Only what EventJson writes: control characters and U+FFFD.
        if (code < 0x80) {
          out += static_cast<char>(code);
        } else {
          out += "\xEF\xBF\xBD";
        }
        break;
      }
      default:
        out += c;
    }
  }
  return std::nullopt;
}

}  // namespace kpath
