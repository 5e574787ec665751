#include "probes/kernel/tracefs.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "probes/kernel/text.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

using text::ParseDecimal;
using text::Split;
using text::Trim;
using text::TrimLeft;
using text::TrimRight;

// Debian's abseil has its own absl::string_view, distinct from std::string_view: Av() bridges
// into absl::StrCat.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool ConsumePrefix(std::string_view* s, std::string_view prefix) {
  if (!s->starts_with(prefix)) return false;
  s->remove_prefix(prefix.size());
  return true;
}

bool IsIdentChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Splits "unsigned long call_site", "char comm[16]", "__data_loc char[] path", "void * ptr" into
// type and name. The name is the last identifier outside a trailing array suffix.
bool SplitDeclaration(std::string_view decl, TracepointField& field) {
  decl = Trim(decl);
  std::string_view array_suffix;
  if (decl.ends_with("]")) {
    size_t open = decl.rfind('[');
    if (open == std::string_view::npos) return false;
    array_suffix = decl.substr(open);
    decl = TrimRight(decl.substr(0, open));
  }
  size_t start = decl.size();
  while (start > 0 && IsIdentChar(decl[start - 1])) --start;
  if (start == decl.size()) return false;
  std::string_view name = decl.substr(start);
  if (absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  std::string_view type = TrimRight(decl.substr(0, start));
  if (type.empty()) return false;
  field.name = std::string(name);
  field.type = absl::StrCat(Av(type), Av(array_suffix));
  return true;
}

absl::Status FormatError(size_t line_no, std::string_view what, std::string_view line) {
  constexpr size_t kQuote = 80;
  std::string quoted(line.substr(0, kQuote));
  for (char& c : quoted) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return absl::InvalidArgumentError(absl::StrCat("tracepoint format line ", line_no, ": ", Av(what),
                                                 " in \"", quoted,
                                                 line.size() > kQuote ? "...\"" : "\""));
}

// "field:unsigned long call_site;\toffset:8;\tsize:8;\tsigned:0;"
absl::StatusOr<TracepointField> ParseFieldLine(std::string_view line, size_t line_no) {
  std::string_view rest = TrimLeft(line);
  // Very old kernels wrote `field special:` for a few fields; both carry the same layout.
  if (!ConsumePrefix(&rest, "field:") && !ConsumePrefix(&rest, "field special:")) {
    return FormatError(line_no, "expected 'field:'", line);
  }
  TracepointField field;
  bool have_offset = false, have_size = false;
  std::vector<std::string_view> parts = Split(rest, ';');
  std::string_view decl = Trim(parts[0]);
  if (decl.empty()) return FormatError(line_no, "empty field declaration", line);
  if (!SplitDeclaration(decl, field)) {
    return FormatError(line_no, "cannot find the field name", line);
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view part = Trim(parts[i]);
    if (part.empty()) continue;
    size_t colon = part.find(':');
    if (colon == std::string_view::npos) return FormatError(line_no, "expected 'key:value'", line);
    std::string_view key = part.substr(0, colon);
    std::string_view value = Trim(part.substr(colon + 1));
    uint32_t number = 0;
    if (key == "offset" || key == "size" || key == "signed") {
      if (!ParseDecimal(value, &number)) {
        return FormatError(line_no, absl::StrCat("'", Av(key), "' is not a number"), line);
      }
    }
    if (key == "offset") {
      field.offset = number;
      have_offset = true;
    } else if (key == "size") {
      field.size = number;
      have_size = true;
    } else if (key == "signed") {
      field.is_signed = number != 0;
    }  // Other keys: ignored, so that a future attribute does not break parsing.
  }
  if (!have_offset) return FormatError(line_no, "field without 'offset:'", line);
  if (!have_size) return FormatError(line_no, "field without 'size:'", line);
  if (static_cast<uint64_t>(field.offset) + field.size > (1u << 16)) {
    return FormatError(line_no, "field beyond any tracepoint record size", line);
  }
  return field;
}

// An automount point nobody has crossed yet (statx reports this since Linux 5.8; older kernels
// say false, and crossing it then mounts tracefs as any tracing tool would).
bool IsUntriggeredAutomount(const std::filesystem::path& path) {
  struct statx stx;
  if (::statx(AT_FDCWD, path.c_str(), AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW, 0, &stx) != 0) {
    return false;
  }
  return (stx.stx_attributes_mask & STATX_ATTR_AUTOMOUNT) != 0 &&
         (stx.stx_attributes & STATX_ATTR_AUTOMOUNT) != 0;
}

}  // namespace

const TracepointField* TracepointFormat::Find(std::string_view field) const {
  for (const auto& f : fields) {
    if (f.name == field) return &f;
  }
  return nullptr;
}

absl::StatusOr<TracepointFormat> ParseTracepointFormat(std::string_view text) {
  TracepointFormat format;
  bool have_name = false, have_id = false, in_format = false;
  size_t line_no = 0;
  for (std::string_view line : text::Lines(text)) {
    ++line_no;
    std::string_view trimmed = Trim(line);
    if (trimmed.empty()) continue;
    // A missing `print fmt:` is tolerated: the layout is complete without it.
    if (trimmed.starts_with("print fmt:")) break;
    if (in_format) {
      absl::StatusOr<TracepointField> field = ParseFieldLine(line, line_no);
      if (!field.ok()) return field.status();
      format.fields.push_back(*std::move(field));
      continue;
    }
    if (ConsumePrefix(&trimmed, "name:")) {
      format.name = std::string(Trim(trimmed));
      if (format.name.empty()) return FormatError(line_no, "empty event name", line);
      have_name = true;
    } else if (ConsumePrefix(&trimmed, "ID:")) {
      if (!ParseDecimal(Trim(trimmed), &format.id)) {
        return FormatError(line_no, "ID is not a number", line);
      }
      have_id = true;
    } else if (trimmed == "format:") {
      in_format = true;
    } else {
      return FormatError(line_no, "expected 'name:', 'ID:' or 'format:'", line);
    }
  }
  if (!have_name) return absl::InvalidArgumentError("tracepoint format: no 'name:' line");
  if (!have_id) return absl::InvalidArgumentError("tracepoint format: no 'ID:' line");
  if (!in_format) return absl::InvalidArgumentError("tracepoint format: no 'format:' section");
  if (format.fields.empty()) {
    return absl::InvalidArgumentError("tracepoint format: 'format:' section has no fields");
  }
  return format;
}

bool IsSafeTracepointName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

absl::StatusOr<std::filesystem::path> FindOrMountTracefs(const HostPaths& paths, bool may_mount,
                                                         std::filesystem::path* mounted) {
  const std::filesystem::path candidates[] = {paths.Sys("kernel/tracing"),
                                              paths.Sys("kernel/debug/tracing")};
  for (const auto& dir : candidates) {
    // Looking inside debugfs's untriggered `tracing` automount point would mount tracefs
    // there as a side effect, and leave it behind.
    if (IsUntriggeredAutomount(dir)) continue;
    if (IsDirectory(dir / "events")) return dir;
  }
  std::string tried = absl::StrCat("no tracefs with an events/ directory at ",
                                   candidates[0].string(), " or ", candidates[1].string());
  if (!may_mount) {
    return absl::FailedPreconditionError(absl::StrCat(tried, " (mounting not allowed)"));
  }
  const std::filesystem::path& target = candidates[0];
  if (::mount("nodev", target.c_str(), "tracefs", 0, nullptr) != 0) {
    int err = errno;
    // FailedPrecondition whatever the errno (ENODEV would map to NotFound, which callers of
    // Tracepoint() read as "the kernel lacks this event").
    return absl::FailedPreconditionError(absl::StrCat(tried, "; mount -t tracefs nodev ",
                                                      target.string(), ": ", std::strerror(err)));
  }
  *mounted = target;
  if (!IsDirectory(target / "events")) {
    return absl::FailedPreconditionError(absl::StrCat(
        tried, "; mounted tracefs at ", target.string(), " but it has no events/ directory"));
  }
  spdlog::info("mounted tracefs at {} (unmounted again at exit)", target.string());
  return target;
}

void UnmountTracefs(const std::filesystem::path& mounted) {
  if (::umount2(mounted.c_str(), MNT_DETACH) != 0) {
    spdlog::warn("unmounting tracefs at {} (mounted by kpathd): {}", mounted.string(),
                 std::strerror(errno));
  }
}

absl::StatusOr<TracepointFormat> ReadTracepointFormat(const std::filesystem::path& tracefs,
                                                      std::string_view category,
                                                      std::string_view event) {
  std::filesystem::path path = tracefs / "events" / category / event / "format";
  if (!PathExists(path)) {
    return absl::NotFoundError(absl::StrCat("tracepoint ", Av(category), ":", Av(event),
                                            " not found (no ", path.string(), ")"));
  }
  absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<TracepointFormat> result = ParseTracepointFormat(*text);
  if (!result.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", result.status().message()));
  }
  return result;
}

std::map<std::string, std::string, std::less<>> QualifiedTracepointNames(
    const std::filesystem::path& tracefs) {
  std::map<std::string, std::string, std::less<>> names;
  // error_code overloads throughout: callers collect metrics, which must not throw.
  std::error_code ec;
  std::vector<std::filesystem::path> categories;
  for (std::filesystem::directory_iterator it(tracefs / "events", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_directory(ec)) categories.push_back(it->path());
  }
  std::sort(categories.begin(), categories.end());
  for (const auto& category : categories) {
    std::string name = category.filename().string();
    for (std::filesystem::directory_iterator it(category, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (!it->is_directory(ec)) continue;
      std::string event_name = it->path().filename().string();
      names.emplace(event_name, absl::StrCat(name, ":", event_name));
    }
    ec.clear();
  }
  return names;
}

}  // namespace kpath
