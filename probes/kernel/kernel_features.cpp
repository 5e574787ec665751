#include "probes/kernel/kernel_features.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "probes/kernel/kernel_symbolizer.h"
#include "spdlog/spdlog.h"

namespace kpath {
namespace {

// Debian's abseil has its own absl::string_view, distinct from std::string_view: these small
// helpers keep this file on std::string_view, and Av() bridges into absl::StrCat.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view Trim(std::string_view s) { return TrimRight(TrimLeft(s)); }

bool StartsWith(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }
bool EndsWith(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }

bool ConsumePrefix(std::string_view* s, std::string_view prefix) {
  if (!s->starts_with(prefix)) return false;
  s->remove_prefix(prefix.size());
  return true;
}

bool ConsumeSuffix(std::string_view* s, std::string_view suffix) {
  if (!s->ends_with(suffix)) return false;
  s->remove_suffix(suffix.size());
  return true;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Plain decimal digits only (no sign, no spaces), within T's range.
template <typename T>
bool ParseDecimal(std::string_view s, T* out) {
  if (!IsDigits(s) || s.size() > 18) return false;
  uint64_t value = 0;
  for (char c : s) value = value * 10 + static_cast<uint64_t>(c - '0');
  if (value > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
  *out = static_cast<T>(value);
  return true;
}

bool IsIdentChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Splits "unsigned long call_site", "char comm[16]", "__data_loc char[] path", "void * ptr" into
// type and name. The name is the last identifier outside a trailing array suffix.
bool SplitDeclaration(std::string_view decl, TracepointField& field) {
  decl = Trim(decl);
  std::string_view array_suffix;
  if (EndsWith(decl, "]")) {
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

// A compiler clone suffix after "name.": one or more `<kind>.<digits>` pairs, for example
// "isra.0", "constprop.0.isra.0". `.cold` (a split-off fragment, not a function entry) never is.
bool IsCloneSuffix(std::string_view suffix) {
  std::vector<std::string_view> parts = Split(suffix, '.');
  if (parts.empty() || parts.size() % 2 != 0) return false;
  for (size_t i = 0; i < parts.size(); i += 2) {
    std::string_view kind = parts[i];
    // `llvm.<n>` is clang's ThinLTO rename of a promoted static function.
    if (kind != "isra" && kind != "constprop" && kind != "part" && kind != "llvm") return false;
    std::string_view digits = parts[i + 1];
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        })) {
      return false;
    }
  }
  return true;
}

bool IsFunctionType(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

// Event and category names become path components: refuse anything that could leave events/.
bool IsSafeName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

bool PathExists(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

bool IsDirectory(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
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
  for (std::string_view line : Split(text, '\n')) {
    ++line_no;
    ConsumeSuffix(&line, "\r");
    std::string_view trimmed = Trim(line);
    if (trimmed.empty()) continue;
    // A missing `print fmt:` is tolerated: the layout is complete without it.
    if (StartsWith(trimmed, "print fmt:")) break;
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

bool ParseHex(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  out = value;
  return true;
}

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  // NR_CPUS is at most 8192 on every architecture today; the bound keeps "0-4000000000" cheap.
  constexpr int kMaxCpu = 1 << 16;
  std::vector<int> cpus;
  std::string_view list = Trim(text);
  if (list.empty()) return cpus;  // The kernel writes an empty line for an empty mask.
  for (std::string_view item : Split(list, ',')) {
    std::string_view first = item, last = item;
    if (size_t dash = item.find('-'); dash != std::string_view::npos) {
      first = item.substr(0, dash);
      last = item.substr(dash + 1);
    }
    int lo = 0, hi = 0;
    // SimpleAtoi accepts surrounding whitespace and signs; the kernel never writes them.
    auto is_number = [](std::string_view s) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
    };
    if (!is_number(first) || !is_number(last) || !ParseDecimal(first, &lo) ||
        !ParseDecimal(last, &hi)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu list \"", Av(list.substr(0, 80)), "\": bad item \"", Av(item), "\""));
    }
    if (lo > hi || hi >= kMaxCpu) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu list \"", Av(list.substr(0, 80)), "\": bad range \"", Av(item), "\""));
    }
    for (int cpu = lo; cpu <= hi; ++cpu) cpus.push_back(cpu);
    if (cpus.size() > static_cast<size_t>(kMaxCpu)) {
      return absl::InvalidArgumentError("cpu list: more CPUs than any kernel supports");
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

absl::StatusOr<KallsymsIndex> KallsymsIndex::Parse(std::string_view text) {
  KallsymsIndex index;
  size_t parsed = 0, skipped = 0;
  bool any_nonzero = false;
  index.by_address_.reserve(text.size() / 40);
  index.names_.reserve(text.size() / 3);
  auto keep_name = [&index](std::string_view name) {
    NameRef ref{static_cast<uint32_t>(index.names_.size()), static_cast<uint32_t>(name.size())};
    index.names_.append(name);
    return ref;
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty()) continue;

    // "<hex address> <type> <name>[\t[<module>]]"
    size_t sp1 = line.find(' ');
    uint64_t address = 0;
    if (sp1 == std::string_view::npos || !ParseHex(line.substr(0, sp1), address) ||
        sp1 + 3 > line.size() || line[sp1 + 2] != ' ') {
      ++skipped;
      continue;
    }
    char type = line[sp1 + 1];
    std::string_view rest = line.substr(sp1 + 3);
    size_t name_end = rest.find_first_of(" \t");
    std::string_view name = rest.substr(0, name_end);
    if (name_end != std::string_view::npos) {
      std::string_view tail = Trim(rest.substr(name_end));
      if (!tail.empty() && (tail.size() < 3 || tail.front() != '[' || tail.back() != ']')) {
        ++skipped;
        continue;
      }
    }
    if (name.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(type))) {
      ++skipped;
      continue;
    }
    ++parsed;
    if (address != 0) any_nonzero = true;
    // `__pfx_<f>` marks the padding before each function (6.2+, CONFIG_FUNCTION_PADDING): not
    // a function, never a probe target, and half of all symbols on such kernels.
    if (IsFunctionType(type) && !StartsWith(name, "__pfx_")) {
      index.by_address_.push_back(Symbol{address, keep_name(name)});
    } else if (StartsWith(name, "__tracepoint_")) {
      index.tracepoint_symbols_.push_back(keep_name(name));
    }
    if (index.names_.size() > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError("kallsyms: names too long");
    }
  }
  if (parsed == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kallsyms: none of ", skipped, " lines is '<address> <type> <name>'"));
  }
  index.addresses_hidden_ = !any_nonzero;
  if (index.by_address_.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("kallsyms: too many symbols");
  }
  // The kernel lists vmlinux in address order, then modules: usually sorted already. Stable:
  // among aliases at one address the kernel's order is kept.
  auto by_address = [](const Symbol& a, const Symbol& b) { return a.address < b.address; };
  if (!std::is_sorted(index.by_address_.begin(), index.by_address_.end(), by_address)) {
    std::stable_sort(index.by_address_.begin(), index.by_address_.end(), by_address);
  }
  // The reserves above are guesses from the text's size: give back what the names and symbols
  // did not use (the index lives as long as the daemon).
  index.names_.shrink_to_fit();
  index.by_address_.shrink_to_fit();
  index.tracepoint_symbols_.shrink_to_fit();
  // Sorting (name, index) pairs touches far less memory than sorting indices into Symbols.
  std::vector<std::pair<std::string_view, uint32_t>> names;
  names.reserve(index.by_address_.size());
  for (size_t i = 0; i < index.by_address_.size(); ++i) {
    names.emplace_back(index.Name(index.by_address_[i].name), static_cast<uint32_t>(i));
  }
  std::sort(names.begin(), names.end());
  index.by_name_.reserve(names.size());
  for (const auto& [name, i] : names) index.by_name_.push_back(i);
  std::sort(index.tracepoint_symbols_.begin(), index.tracepoint_symbols_.end(),
            [&index](NameRef a, NameRef b) { return index.Name(a) < index.Name(b); });
  return index;
}

size_t KallsymsIndex::MemoryBytes() const {
  return names_.capacity() + by_address_.capacity() * sizeof(Symbol) +
         by_name_.capacity() * sizeof(uint32_t) + tracepoint_symbols_.capacity() * sizeof(NameRef);
}

std::vector<uint32_t>::const_iterator KallsymsIndex::NameLowerBound(std::string_view name) const {
  return std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [this](uint32_t i, std::string_view n) { return Name(by_address_[i].name) < n; });
}

std::optional<std::string> KallsymsIndex::ResolveFunction(std::string_view name) const {
  if (name.empty()) return std::nullopt;
  if (HasSymbol(name)) return std::string(name);
  // Clones sort right after "name." in the map. Prefer the shortest (fewest transformations),
  // then the alphabetically first, so the answer is stable.
  std::string prefix = absl::StrCat(Av(name), ".");
  std::optional<std::string_view> best;
  for (auto it = NameLowerBound(prefix); it != by_name_.end(); ++it) {
    std::string_view candidate = Name(by_address_[*it].name);
    if (!StartsWith(candidate, prefix)) break;
    if (!IsCloneSuffix(candidate.substr(prefix.size()))) continue;
    if (!best || candidate.size() < best->size()) best = candidate;
  }
  if (!best) return std::nullopt;
  return std::string(*best);
}

bool KallsymsIndex::HasSymbol(std::string_view name) const {
  auto it = NameLowerBound(name);
  return it != by_name_.end() && Name(by_address_[*it].name) == name;
}

bool KallsymsIndex::HasTracepoint(std::string_view event) const {
  if (event.empty()) return false;
  std::string symbol = absl::StrCat("__tracepoint_", Av(event));
  auto it = std::lower_bound(tracepoint_symbols_.begin(), tracepoint_symbols_.end(), symbol,
                             [this](NameRef ref, std::string_view n) { return Name(ref) < n; });
  if (it != tracepoint_symbols_.end() && Name(*it) == symbol) return true;
  return HasSymbol(absl::StrCat("__traceiter_", Av(event)));
}

std::optional<std::string> KallsymsIndex::Symbolize(uint64_t address) const {
  if (addresses_hidden_ || by_address_.empty()) return std::nullopt;
  auto it = std::upper_bound(by_address_.begin(), by_address_.end(), address,
                             [](uint64_t a, const Symbol& s) { return a < s.address; });
  if (it == by_address_.begin()) return std::nullopt;
  --it;
  std::string_view name = Name(it->name);
  // A C identifier has no '.': anything after one is a compiler suffix (.isra.0, .cold, ...).
  name = name.substr(0, name.find('.'));
  return std::string(name);
}

// ---------------------------------------------------------------------------------------------

LiveKernelFeatures::LiveKernelFeatures(HostPaths paths, bool may_mount)
    : paths_(std::move(paths)), may_mount_(may_mount) {}

void LiveKernelFeatures::ReleaseBtf() {
  std::lock_guard<std::mutex> lock(mu_);
  if (btf_ != nullptr) btf__free(btf_);
  btf_ = nullptr;
  btf_tried_ = false;
}

LiveKernelFeatures::~LiveKernelFeatures() {
  if (btf_ != nullptr) btf__free(btf_);
  if (!mounted_tracefs_.empty()) {
    if (::umount2(mounted_tracefs_.c_str(), MNT_DETACH) != 0) {
      spdlog::warn("unmounting tracefs at {} (mounted by kpathd): {}", mounted_tracefs_.string(),
                   std::strerror(errno));
    }
  }
}

struct btf* LiveKernelFeatures::VmlinuxBtf() {
  if (btf_tried_) return btf_;
  btf_tried_ = true;
  std::filesystem::path path = paths_.Sys("kernel/btf/vmlinux");
  if (!PathExists(path)) {
    spdlog::info("no vmlinux BTF at {}: BTF-based probes (tp_btf, fentry, CO-RE) are off",
                 path.string());
    return nullptr;
  }
  errno = 0;
  struct btf* btf = btf__parse(path.c_str(), nullptr);
  if (btf == nullptr) {
    int err = errno;
    spdlog::warn("btf__parse({}): {}; BTF-based probes are off", path.string(),
                 std::strerror(err != 0 ? err : EINVAL));
    return nullptr;
  }
  btf_ = btf;
  return btf_;
}

bool LiveKernelFeatures::HasVmlinuxBtf() {
  std::lock_guard<std::mutex> lock(mu_);
  return VmlinuxBtf() != nullptr;
}

std::optional<int> LiveKernelFeatures::BtfTracepointArgs(std::string_view event) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || event.empty()) return std::nullopt;
  std::string name = absl::StrCat("btf_trace_", Av(event));
  int id = btf__find_by_name_kind(btf, name.c_str(), BTF_KIND_TYPEDEF);
  if (id <= 0) return std::nullopt;
  // typedef btf_trace_<event> -> pointer -> function prototype (void *__data, args...)
  const struct btf_type* t = btf__type_by_id(btf, btf__type_by_id(btf, id)->type);
  if (t == nullptr || !btf_is_ptr(t)) return std::nullopt;
  t = btf__type_by_id(btf, t->type);
  if (t == nullptr || !btf_is_func_proto(t) || btf_vlen(t) < 1) return std::nullopt;
  return static_cast<int>(btf_vlen(t)) - 1;
}

bool LiveKernelFeatures::BtfHasFunction(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || name.empty()) return false;
  return btf__find_by_name_kind(btf, std::string(name).c_str(), BTF_KIND_FUNC) > 0;
}

std::optional<std::vector<std::string>> LiveKernelFeatures::BtfFunctionParams(
    std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || name.empty()) return std::nullopt;
  int id = btf__find_by_name_kind(btf, std::string(name).c_str(), BTF_KIND_FUNC);
  if (id <= 0) return std::nullopt;
  // FUNC -> FUNC_PROTO, whose params carry the names.
  const struct btf_type* proto = btf__type_by_id(btf, btf__type_by_id(btf, id)->type);
  if (proto == nullptr || !btf_is_func_proto(proto)) return std::nullopt;
  std::vector<std::string> params;
  const struct btf_param* param = btf_params(proto);
  for (int i = 0; i < btf_vlen(proto); ++i) {
    const char* param_name = btf__name_by_offset(btf, param[i].name_off);
    params.emplace_back(param_name != nullptr ? param_name : "");
  }
  return params;
}

std::optional<uint32_t> LiveKernelFeatures::BtfMemberOffset(std::string_view struct_name,
                                                            std::string_view member) {
  std::lock_guard<std::mutex> lock(mu_);
  struct btf* btf = VmlinuxBtf();
  if (btf == nullptr || struct_name.empty() || member.empty()) return std::nullopt;
  int id = btf__find_by_name_kind(btf, std::string(struct_name).c_str(), BTF_KIND_STRUCT);
  if (id <= 0) return std::nullopt;
  const struct btf_type* t = btf__type_by_id(btf, id);
  const struct btf_member* m = btf_members(t);
  for (int i = 0; i < btf_vlen(t); ++i) {
    const char* name = btf__name_by_offset(btf, m[i].name_off);
    if (name != nullptr && member == name) {
      uint32_t bits = btf_member_bit_offset(t, static_cast<uint32_t>(i));
      if (bits % 8 != 0) return std::nullopt;  // a bitfield: no byte offset
      return bits / 8;
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::filesystem::path> LiveKernelFeatures::TracefsLocked() {
  if (tracefs_) return *tracefs_;
  const std::filesystem::path candidates[] = {paths_.Sys("kernel/tracing"),
                                              paths_.Sys("kernel/debug/tracing")};
  for (const auto& dir : candidates) {
    // Looking inside debugfs's untriggered `tracing` automount point would mount tracefs
    // there as a side effect, and leave it behind.
    if (IsUntriggeredAutomount(dir)) continue;
    if (IsDirectory(dir / "events")) {
      tracefs_ = dir;
      return *tracefs_;
    }
  }
  std::string tried = absl::StrCat("no tracefs with an events/ directory at ",
                                   candidates[0].string(), " or ", candidates[1].string());
  if (!may_mount_) {
    tracefs_ = absl::FailedPreconditionError(absl::StrCat(tried, " (mounting not allowed)"));
    return *tracefs_;
  }
  const std::filesystem::path& target = candidates[0];
  if (::mount("nodev", target.c_str(), "tracefs", 0, nullptr) != 0) {
    int err = errno;
    // FailedPrecondition whatever the errno (ENODEV would map to NotFound, which callers of
    // Tracepoint() read as "the kernel lacks this event").
    tracefs_ = absl::FailedPreconditionError(absl::StrCat(
        tried, "; mount -t tracefs nodev ", target.string(), ": ", std::strerror(err)));
    return *tracefs_;
  }
  mounted_tracefs_ = target;
  if (!IsDirectory(target / "events")) {
    tracefs_ = absl::FailedPreconditionError(absl::StrCat(
        tried, "; mounted tracefs at ", target.string(), " but it has no events/ directory"));
    return *tracefs_;
  }
  spdlog::info("mounted tracefs at {} (unmounted again at exit)", target.string());
  tracefs_ = target;
  return *tracefs_;
}

absl::StatusOr<std::filesystem::path> LiveKernelFeatures::Tracefs() {
  std::lock_guard<std::mutex> lock(mu_);
  return TracefsLocked();
}

absl::StatusOr<TracepointFormat> LiveKernelFeatures::Tracepoint(std::string_view category,
                                                                std::string_view event) {
  if (!IsSafeName(category) || !IsSafeName(event)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad tracepoint name \"", Av(category), ":", Av(event), "\""));
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = absl::StrCat(Av(category), "/", Av(event));
  if (auto it = formats_.find(key); it != formats_.end()) return it->second;
  absl::StatusOr<std::filesystem::path> tracefs = TracefsLocked();
  if (!tracefs.ok()) return tracefs.status();  // not cached: not an answer about the event
  std::filesystem::path path = *tracefs / "events" / category / event / "format";
  absl::StatusOr<TracepointFormat> result;
  if (!PathExists(path)) {
    result = absl::NotFoundError(absl::StrCat("tracepoint ", Av(category), ":", Av(event),
                                              " not found (no ", path.string(), ")"));
  } else if (absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 20); !text.ok()) {
    result = text.status();
  } else if (result = ParseTracepointFormat(*text); !result.ok()) {
    result =
        absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", result.status().message()));
  }
  // A missing event is asked again next time: a module loaded later may bring it (probe retry).
  if (!absl::IsNotFound(result.status())) formats_.emplace(std::move(key), result);
  return result;
}

bool LiveKernelFeatures::TracepointExists(std::string_view category, std::string_view event) {
  if (!IsSafeName(category) || !IsSafeName(event)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (struct btf* btf = VmlinuxBtf(); btf != nullptr) {
    std::string name = absl::StrCat("btf_trace_", Av(event));
    if (btf__find_by_name_kind(btf, name.c_str(), BTF_KIND_TYPEDEF) > 0) return true;
  }
  if (auto kallsyms = KallsymsLocked(); kallsyms && kallsyms->HasTracepoint(event)) return true;
  absl::StatusOr<std::filesystem::path> tracefs = TracefsLocked();
  return tracefs.ok() && IsDirectory(*tracefs / "events" / category / event);
}

std::optional<std::string> LiveKernelFeatures::KernelFunction(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto kallsyms = KallsymsLocked();
  if (!kallsyms) return std::nullopt;
  return kallsyms->ResolveFunction(name);
}

absl::Status LiveKernelFeatures::KprobesAvailable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (kprobes_) return *kprobes_;
  std::filesystem::path pmu = paths_.Sys("bus/event_source/devices/kprobe");
  if (PathExists(pmu / "type")) {
    kprobes_ = absl::OkStatus();
    return *kprobes_;
  }
  std::string tracefs_part;
  absl::StatusOr<std::filesystem::path> tracefs = TracefsLocked();
  if (tracefs.ok()) {
    if (PathExists(*tracefs / "kprobe_events")) {
      kprobes_ = absl::OkStatus();
      return *kprobes_;
    }
    tracefs_part = absl::StrCat("no kprobe_events in tracefs (", tracefs->string(), ")");
  } else {
    tracefs_part =
        absl::StrCat("no tracefs to look for kprobe_events (", tracefs.status().message(), ")");
  }
  kprobes_ = absl::FailedPreconditionError(absl::StrCat("no kprobe perf event source (",
                                                        pmu.string(), ") and ", tracefs_part,
                                                        ": kernel built without CONFIG_KPROBES?"));
  return *kprobes_;
}

int LiveKernelFeatures::PossibleCpus() {
  std::lock_guard<std::mutex> lock(mu_);
  if (possible_cpus_) return *possible_cpus_;
  std::filesystem::path path = paths_.Sys("devices/system/cpu/possible");
  absl::StatusOr<std::vector<int>> cpus = [&]() -> absl::StatusOr<std::vector<int>> {
    absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 16);
    if (!text.ok()) return text.status();
    return ParseCpuList(*text);
  }();
  if (cpus.ok() && !cpus->empty()) {
    // A count, as libbpf and the kernel's per-CPU map copies (for_each_possible_cpu) use.
    possible_cpus_ = static_cast<int>(cpus->size());
  } else {
    int n = libbpf_num_possible_cpus();
    spdlog::warn("{}: {}; using libbpf's count {}", path.string(),
                 cpus.ok() ? "empty CPU list" : std::string(cpus.status().message()), n);
    possible_cpus_ = n > 0 ? n : 1;
  }
  return *possible_cpus_;
}

std::shared_ptr<const KallsymsIndex> LiveKernelFeatures::KallsymsLocked() {
  if (kallsyms_tried_) return kallsyms_;
  kallsyms_tried_ = true;
  std::filesystem::path path = paths_.Proc("kallsyms");
  // One copy for the process: the percpu probe's symbolizer shares it (SharedKallsymsIndex).
  absl::StatusOr<std::string> modules = ReadFileToString(paths_.Proc("modules"));
  absl::StatusOr<std::shared_ptr<const KallsymsIndex>> index =
      SharedKallsymsIndex(paths_, modules.ok() ? *modules : std::string());
  if (!index.ok()) {
    spdlog::warn("kallsyms unavailable: {}", std::string(index.status().message()));
    return nullptr;
  }
  if ((*index)->AddressesHidden()) {
    spdlog::info("{}: addresses hidden (kptr_restrict); names only, no symbolization",
                 path.string());
  }
  kallsyms_ = *std::move(index);
  return kallsyms_;
}

std::shared_ptr<const KallsymsIndex> LiveKernelFeatures::Kallsyms() {
  std::lock_guard<std::mutex> lock(mu_);
  return KallsymsLocked();
}

}  // namespace kpath
