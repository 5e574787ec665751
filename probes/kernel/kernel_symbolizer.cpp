#include "probes/kernel/kernel_symbolizer.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "fmt/format.h"
#include "probes/kernel/kallsyms.h"
#include "spdlog/spdlog.h"

namespace kpath {

bool IsLinkerMarkerSymbol(std::string_view name) {
  // Section boundaries the linker exports as text symbols (_stext, _etext, _sinittext,
  // _einittext, __entry_text_end, __start_*/__stop_*, ...): an address "inside" one of them lies
  // past the last real function before it, e.g. in a BPF program or trampoline.
  if (name.starts_with("__start_") || name.starts_with("__stop_")) return true;
  if (name.size() >= 5 && name.front() == '_' && name.ends_with("text")) {
    std::string_view core = name.substr(name.find_first_not_of('_'));
    return core.starts_with("s") || core.starts_with("e") || core == "text";
  }
  return name.ends_with("_text_end") || name.ends_with("_text_start") || name == "_end";
}

std::optional<std::string_view> BpfProgramName(std::string_view function) {
  constexpr std::string_view kPrefix = "bpf_prog_";
  constexpr size_t kTagLength = 16;
  if (!function.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = function.substr(kPrefix.size());
  if (rest.size() < kTagLength) return std::nullopt;
  for (char c : rest.substr(0, kTagLength)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  rest.remove_prefix(kTagLength);
  if (rest.empty()) return std::string_view();
  if (rest.front() != '_') return std::nullopt;
  return rest.substr(1);
}

absl::StatusOr<std::shared_ptr<const KallsymsIndex>> SharedKallsymsIndex(
    const HostPaths& paths, const std::string& modules) {
  struct Parsed {
    std::string modules;
    std::weak_ptr<const KallsymsIndex> index;
  };
  static std::mutex mu;
  static std::map<std::string, Parsed> by_path;
  const std::filesystem::path path = paths.Proc("kallsyms");
  std::lock_guard<std::mutex> lock(mu);
  Parsed& parsed = by_path[path.string()];
  if (std::shared_ptr<const KallsymsIndex> held = parsed.index.lock();
      held && parsed.modules == modules) {
    return held;
  }
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<KallsymsIndex> index = KallsymsIndex::Parse(*text);
  if (!index.ok()) {
    return absl::Status(index.status().code(), fmt::format("{}: {}", path.string(),
                                                           std::string(index.status().message())));
  }
  auto shared = std::make_shared<const KallsymsIndex>(*std::move(index));
  parsed = {modules, shared};
  return shared;
}

absl::StatusOr<KallsymsOutsideVmlinux> ParseKallsymsOutsideVmlinux(
    std::string_view text, std::span<const std::string_view> wanted) {
  KallsymsOutsideVmlinux out;
  std::string module_lines;
  KallsymsLineCounts counts =
      ForEachKallsymsLine(text, [&](const KallsymsLine& symbol, std::string_view line) {
        uint64_t address = symbol.address;
        std::string_view name = symbol.name;
        if (!symbol.module.empty()) {
          module_lines.append(line);
          module_lines.push_back('\n');
          return;
        }
        if (name == "_stext") {
          out.text_begin = address;
        } else if (name == "_etext") {
          out.text_end = address;
        } else if (name == "_sinittext") {
          out.init_begin = address;
        } else if (name == "_einittext") {
          out.init_end = address;
        }
        if (std::find(wanted.begin(), wanted.end(), name) != wanted.end() &&
            std::find(out.listed_names.begin(), out.listed_names.end(), name) ==
                out.listed_names.end()) {
          out.listed_names.emplace_back(name);
        }
      });
  if (counts.parsed == 0) {
    return absl::InvalidArgumentError("kallsyms: no '<address> <type> <name>' line");
  }
  if (!module_lines.empty()) {
    absl::StatusOr<KallsymsIndex> modules = KallsymsIndex::Parse(module_lines);
    if (modules.ok()) out.modules = std::make_shared<const KallsymsIndex>(*std::move(modules));
  }
  return out;
}

KernelSymbolizer::KernelSymbolizer(HostPaths paths, std::shared_ptr<const KallsymsIndex> vmlinux,
                                   std::chrono::seconds module_reread, Clock clock)
    : paths_(std::move(paths)),
      vmlinux_(std::move(vmlinux)),
      vmlinux_tried_(vmlinux_ != nullptr),
      module_reread_(module_reread),
      clock_(std::move(clock)) {}

absl::Status KernelSymbolizer::LoadVmlinux() {
  vmlinux_tried_ = true;
  // Without module support /proc/modules is absent: the kernel's symbols never change then.
  absl::StatusOr<std::string> modules = ReadFileToString(paths_.Proc("modules"));
  absl::StatusOr<std::shared_ptr<const KallsymsIndex>> index =
      SharedKallsymsIndex(paths_, modules.ok() ? *modules : std::string());
  if (!index.ok()) return index.status();
  vmlinux_ = *std::move(index);
  memo_.clear();
  return absl::OkStatus();
}

absl::Status KernelSymbolizer::ReadOutside() {
  outside_read_at_ = clock_();
  ++reloads_;
  memo_.clear();
  absl::StatusOr<std::string> text = ReadFileToString(paths_.Proc("kallsyms"));
  absl::StatusOr<KallsymsOutsideVmlinux> parsed =
      text.ok() ? ParseKallsymsOutsideVmlinux(*text) : text.status();
  if (!parsed.ok()) {
    spdlog::debug("kallsyms for module and BPF frames: {}", std::string(parsed.status().message()));
    if (!outside_) outside_ = KallsymsOutsideVmlinux{};
    return parsed.status();
  }
  outside_ = *std::move(parsed);
  return absl::OkStatus();
}

absl::Status KernelSymbolizer::Refresh() {
  if (!vmlinux_) {
    if (absl::Status s = LoadVmlinux(); !s.ok()) return s;
  }
  absl::StatusOr<std::string> modules = ReadFileToString(paths_.Proc("modules"));
  std::string current = modules.ok() ? *modules : std::string();
  if (outside_ && modules_ == current) return absl::OkStatus();
  if (absl::Status s = ReadOutside(); !s.ok()) return s;
  modules_ = std::move(current);
  return absl::OkStatus();
}

bool KernelSymbolizer::InVmlinuxText(uint64_t address) const {
  const KallsymsOutsideVmlinux& o = *outside_;
  if (o.text_begin == 0 || o.text_end == 0) return true;  // bounds unknown: ask vmlinux
  if (address >= o.text_begin && address < o.text_end) return true;
  return o.init_begin != 0 && address >= o.init_begin && address < o.init_end;
}

std::optional<std::string> KernelSymbolizer::Lookup(uint64_t address) {
  if (!vmlinux_tried_) (void)LoadVmlinux();
  if (!outside_) (void)ReadOutside();
  if (InVmlinuxText(address)) return vmlinux_ ? vmlinux_->Symbolize(address) : std::nullopt;
  // Module or BPF code: programs load and unload at any time, so that part may be stale.
  if (clock_() - *outside_read_at_ >= module_reread_) (void)ReadOutside();
  if (outside_->modules && !outside_->modules->AddressesHidden()) {
    return outside_->modules->Symbolize(address);
  }
  return std::nullopt;
}

std::vector<std::optional<std::string>> KernelSymbolizer::Symbolize(
    std::span<const uint64_t> addresses) {
  std::vector<std::optional<std::string>> names;
  names.reserve(addresses.size());
  for (uint64_t address : addresses) names.push_back(Lookup(address));
  return names;
}

const std::string& KernelSymbolizer::Name(uint64_t address) {
  auto it = memo_.find(address);
  if (it != memo_.end()) return it->second;
  std::string name = "unknown";
  if (address != 0) {
    // Lookup may re-read the module/BPF part, which empties the memo: ask before inserting.
    std::optional<std::string> fn = Lookup(address);
    if (fn && !IsLinkerMarkerSymbol(*fn)) name = *std::move(fn);
  }
  // Bounded: distinct call sites are few; a runaway (random addresses) resets the memo.
  if (memo_.size() > 100000) memo_.clear();
  return memo_.emplace(address, std::move(name)).first->second;
}

}  // namespace kpath
