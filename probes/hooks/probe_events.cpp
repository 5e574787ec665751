#include "probes/hooks/probe_events.h"

#include <optional>

#include "probes/kernel/text.h"

namespace kpath {
namespace {

using text::ParseHex;
using text::ParseOffset;
using text::Tokens;
using text::Trim;

// "/bin/bash:0x000000000004adf0" or with a reference counter "...:0x4adf0(0x1234)".
bool ParseUprobeTarget(std::string_view spec, ProbeEvent& event) {
  if (size_t paren = spec.find('('); paren != std::string_view::npos) spec = spec.substr(0, paren);
  size_t colon = spec.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::optional<uint64_t> offset = ParseHex(spec.substr(colon + 1));
  if (!offset) return false;
  event.target = std::string(spec.substr(0, colon));
  event.offset = *offset;
  return true;
}

// "vfs_read", "vfs_read+16", "ext4:ext4_file_open", "0xffffffff81234560".
bool ParseKprobeTarget(std::string_view spec, ProbeEvent& event) {
  if (spec.empty()) return false;
  if (spec.starts_with("0x")) {
    if (!ParseHex(spec)) return false;
    event.target = std::string(spec);
    event.by_address = true;
    return true;
  }
  if (size_t plus = spec.rfind('+'); plus != std::string_view::npos) {
    std::optional<uint64_t> offset = ParseOffset(spec.substr(plus + 1));
    if (!offset || plus == 0) return false;
    event.offset = *offset;
    spec = spec.substr(0, plus);
  }
  if (size_t colon = spec.find(':'); colon != std::string_view::npos) {
    event.module = std::string(spec.substr(0, colon));
    spec = spec.substr(colon + 1);
  }
  if (spec.empty()) return false;
  event.target = std::string(spec);
  return true;
}

// Appends the events of one definition line; false if the line is in no known format.
bool ParseLine(std::string_view line, std::vector<ProbeEvent>& out) {
  std::vector<std::string_view> tokens = Tokens(line);
  if (tokens.empty()) return false;
  std::string_view head = tokens[0];
  size_t colon = head.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  char kind = head[0];
  // Between the kind letter and ':' only a maxactive count may stand ("r16:").
  std::string_view maxactive = head.substr(1, colon - 1);
  if (!maxactive.empty() && !text::ParseDecimal(maxactive)) return false;
  std::string_view name = head.substr(colon + 1);
  ProbeEvent event;
  if (size_t slash = name.find('/'); slash != std::string_view::npos) {
    event.group = std::string(name.substr(0, slash));
    event.event = std::string(name.substr(slash + 1));
  } else {
    event.event = std::string(name);
  }
  std::string_view target = tokens.size() > 1 ? tokens[1] : std::string_view();

  switch (kind) {
    case 'p':
    case 'r':
      // A uprobe's target is an absolute path; a kprobe's is a symbol or an address.
      if (target.starts_with('/')) {
        event.type = kind == 'p' ? ProbeEventType::kUprobe : ProbeEventType::kUretprobe;
        if (!ParseUprobeTarget(target, event)) return false;
      } else {
        event.type = kind == 'p' ? ProbeEventType::kKprobe : ProbeEventType::kKretprobe;
        if (!ParseKprobeTarget(target, event)) return false;
      }
      out.push_back(std::move(event));
      return true;
    case 'f': {
      if (target.empty()) return false;
      bool is_return = false;
      if (target.ends_with("%return")) {
        target.remove_suffix(7);
        is_return = true;
      } else if (target.ends_with(":exit")) {
        target.remove_suffix(5);
        is_return = true;
      } else if (target.ends_with(":entry")) {
        target.remove_suffix(6);
      }
      event.type = is_return ? ProbeEventType::kFprobeReturn : ProbeEventType::kFprobe;
      bool any = false;
      while (!target.empty()) {
        size_t comma = target.find(',');
        std::string_view function = target.substr(0, comma);
        target = comma == std::string_view::npos ? std::string_view() : target.substr(comma + 1);
        if (function.empty() || function.starts_with('!')) continue;  // "!f": excluded
        ProbeEvent one = event;
        if (!ParseKprobeTarget(function, one)) return false;
        out.push_back(std::move(one));
        any = true;
      }
      return any;
    }
    case 't':
      if (target.empty()) return false;
      event.type = ProbeEventType::kTracepointProbe;
      event.target = std::string(target);
      out.push_back(std::move(event));
      return true;
    case 'e':
    case 's':
    case 'u':
      event.type = ProbeEventType::kOther;
      event.target = std::string(target);
      out.push_back(std::move(event));
      return true;
    default:
      return false;
  }
}

}  // namespace

ProbeEventList ParseProbeEvents(std::string_view text) {
  ProbeEventList list;
  for (std::string_view line : text::Lines(text)) {
    std::string_view trimmed = Trim(line);
    if (trimmed.empty() || trimmed.starts_with('#')) continue;
    if (!ParseLine(trimmed, list.events)) ++list.unparsed_lines;
  }
  return list;
}

}  // namespace kpath
