#include "probes/kernel/kernel_symbolizer.h"

#include <map>
#include <mutex>

#include "fmt/format.h"

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

absl::Status KernelSymbolizer::Refresh() {
  // Without module support the file is absent: the kernel's symbols never change then.
  absl::StatusOr<std::string> modules = ReadFileToString(paths_.Proc("modules"));
  std::string current = modules.ok() ? *modules : std::string();
  if (index_ && current == modules_) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<const KallsymsIndex>> index = SharedKallsymsIndex(paths_, current);
  if (!index.ok()) return index.status();
  index_ = *std::move(index);
  modules_ = std::move(current);
  memo_.clear();
  ++reloads_;
  return absl::OkStatus();
}

const std::string& KernelSymbolizer::Symbolize(uint64_t address) {
  auto it = memo_.find(address);
  if (it != memo_.end()) return it->second;
  std::string name = "unknown";
  if (index_ && !index_->AddressesHidden() && address != 0) {
    std::optional<std::string> fn = index_->Symbolize(address);
    if (fn && !IsLinkerMarkerSymbol(*fn)) name = *fn;
  }
  // Bounded: distinct call sites are few; a runaway (random addresses) resets the memo.
  if (memo_.size() > 100000) memo_.clear();
  return memo_.emplace(address, std::move(name)).first->second;
}

}  // namespace kpath
