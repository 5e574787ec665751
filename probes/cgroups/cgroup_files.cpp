#include "probes/cgroups/cgroup_files.h"

#include <algorithm>
#include <charconv>

#include "fmt/format.h"
#include "probes/kernel/text.h"

namespace kpath {

namespace {

std::vector<std::string_view> SplitWhitespace(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

template <typename F>
void ForEachLine(std::string_view text, F&& f) {
  size_t number = 0;
  for (std::string_view line : text::Lines(text)) {
    if (!f(++number, line)) return;
  }
}

template <typename T>
bool ParseUnsigned(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string DecodeOctalEscapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      bool octal = true;
      int value = 0;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') {
          octal = false;
          break;
        }
        value = value * 8 + (c - '0');
      }
      if (octal && value < 256) {
        out += static_cast<char>(value);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<CgroupController>> ParseProcCgroups(std::string_view text) {
  // Column indexes, the classic layout unless a header says otherwise.
  size_t name_col = 0, hierarchy_col = 1, num_col = 2, enabled_col = 3;
  std::optional<size_t> hierarchy_at = hierarchy_col, enabled_at = enabled_col;
  std::vector<CgroupController> out;
  absl::Status error = absl::OkStatus();
  ForEachLine(text, [&](size_t number, std::string_view line) {
    std::vector<std::string_view> words = SplitWhitespace(line);
    if (words.empty()) return true;
    if (words[0].starts_with('#')) {
      words[0].remove_prefix(1);
      if (words[0].empty()) words.erase(words.begin());
      auto find = [&](std::string_view column) -> std::optional<size_t> {
        auto it = std::find(words.begin(), words.end(), column);
        if (it == words.end()) return std::nullopt;
        return static_cast<size_t>(it - words.begin());
      };
      std::optional<size_t> name = find("subsys_name"), num = find("num_cgroups");
      if (!name || !num) {
        error = absl::InvalidArgumentError(fmt::format(
            "line {}: header without subsys_name and num_cgroups: \"{}\"", number, line));
        return false;
      }
      name_col = *name;
      num_col = *num;
      hierarchy_at = find("hierarchy");
      enabled_at = find("enabled");
      return true;
    }
    CgroupController c;
    size_t needed = std::max({name_col, num_col, hierarchy_at.value_or(0), enabled_at.value_or(0)});
    uint32_t enabled = 1;
    if (words.size() <= needed || !ParseUnsigned(words[num_col], c.num_cgroups) ||
        (hierarchy_at && !ParseUnsigned(words[*hierarchy_at], c.hierarchy)) ||
        (enabled_at && !ParseUnsigned(words[*enabled_at], enabled))) {
      error = absl::InvalidArgumentError(
          fmt::format("line {}: expected \"<controller> <hierarchy> <num_cgroups> <enabled>\", "
                      "got \"{}\"",
                      number, line));
      return false;
    }
    c.name = std::string(words[name_col]);
    c.enabled = enabled != 0;
    out.push_back(std::move(c));
    return true;
  });
  if (!error.ok()) return error;
  if (out.empty()) return absl::InvalidArgumentError("no controller listed");
  return out;
}

std::optional<uint64_t> CgroupStat::Get(std::string_view key) const {
  auto it = values.find(key);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<CgroupStat> ParseCgroupStat(std::string_view text) {
  CgroupStat stat;
  absl::Status error = absl::OkStatus();
  ForEachLine(text, [&](size_t number, std::string_view line) {
    std::vector<std::string_view> words = SplitWhitespace(line);
    if (words.empty()) return true;
    uint64_t value = 0;
    if (words.size() != 2 || !ParseUnsigned(words[1], value)) {
      error = absl::InvalidArgumentError(
          fmt::format("line {}: expected \"<key> <count>\", got \"{}\"", number, line));
      return false;
    }
    stat.values[std::string(words[0])] = value;
    return true;
  });
  if (!error.ok()) return error;
  if (!stat.Get("nr_descendants")) return absl::InvalidArgumentError("no nr_descendants line");
  return stat;
}

bool CgroupMount::HasOption(std::string_view option) const {
  return std::find(options.begin(), options.end(), option) != options.end();
}

absl::StatusOr<std::vector<CgroupMount>> ParseCgroupMounts(std::string_view mountinfo) {
  std::vector<CgroupMount> out;
  absl::Status error = absl::OkStatus();
  ForEachLine(mountinfo, [&](size_t number, std::string_view line) {
    // id parent major:minor root mount-point options [optional fields...] - fstype source super
    std::vector<std::string_view> f = SplitWhitespace(line);
    if (f.empty()) return true;
    auto dash = std::find(f.begin() + std::min<size_t>(f.size(), 6), f.end(), "-");
    if (f.size() < 7 || dash == f.end() || f.end() - dash < 3) {
      error = absl::InvalidArgumentError(
          fmt::format("line {}: not a mountinfo line: \"{}\"", number, line));
      return false;
    }
    std::string_view fstype = *(dash + 1);
    if (fstype != "cgroup" && fstype != "cgroup2") return true;
    CgroupMount m;
    m.version = fstype == "cgroup2" ? 2 : 1;
    m.root = DecodeOctalEscapes(f[3]);
    m.mount_point = DecodeOctalEscapes(f[4]);
    std::string_view super = f.end() - dash >= 4 ? *(dash + 3) : std::string_view();
    while (!super.empty()) {
      size_t comma = super.find(',');
      std::string_view option = super.substr(0, comma);
      if (!option.empty() && option != "rw" && option != "ro") m.options.emplace_back(option);
      if (comma == std::string_view::npos) break;
      super.remove_prefix(comma + 1);
    }
    out.push_back(std::move(m));
    return true;
  });
  if (!error.ok()) return error;
  return out;
}

std::optional<std::string> OwnCgroupDirectory(std::string_view proc_pid_cgroup,
                                              const std::vector<CgroupMount>& mounts) {
  // "hierarchy-id:controllers:path"; the v2 line is "0::path".
  struct Membership {
    std::string controllers;
    std::string path;
  };
  std::vector<Membership> lines;
  for (std::string_view line : text::Split(proc_pid_cgroup, '\n')) {
    // The path may hold ':' itself: split at the first two only.
    size_t first = line.find(':');
    size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    lines.push_back({std::string(line.substr(first + 1, second - first - 1)),
                     std::string(line.substr(second + 1))});
  }
  auto directory = [&](const Membership& m, int version) -> std::optional<std::string> {
    for (const CgroupMount& mount : mounts) {
      if (mount.version != version) continue;
      if (version == 1) {
        bool same = true;
        for (std::string_view c : text::Split(m.controllers, ',')) same &= mount.HasOption(c);
        if (!same) continue;
      }
      std::string_view root = mount.root;
      if (root == "/") root = {};
      if (!m.path.starts_with(root) ||
          (m.path.size() > root.size() && m.path[root.size()] != '/')) {
        continue;
      }
      std::string rest = m.path.substr(root.size());
      return rest.empty() || rest == "/" ? mount.mount_point : mount.mount_point + rest;
    }
    return std::nullopt;
  };
  for (const Membership& m : lines) {
    if (!m.controllers.empty()) continue;
    if (std::optional<std::string> dir = directory(m, 2)) return dir;
  }
  for (const Membership& m : lines) {
    if (m.controllers != "name=systemd") continue;
    if (std::optional<std::string> dir = directory(m, 1)) return dir;
  }
  for (const Membership& m : lines) {
    if (std::optional<std::string> dir = directory(m, 1)) return dir;
  }
  return std::nullopt;
}

}  // namespace kpath
