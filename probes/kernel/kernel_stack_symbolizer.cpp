#include "probes/kernel/kernel_stack_symbolizer.h"

#include <algorithm>

#include "fmt/format.h"
#include "probes/kernel/kallsyms.h"
#include "probes/kernel/text.h"
#include "spdlog/spdlog.h"

namespace kpath {

absl::StatusOr<KallsymsOutsideVmlinux> ParseKallsymsOutsideVmlinux(
    std::string_view text, std::span<const std::string_view> wanted) {
  KallsymsOutsideVmlinux out;
  std::string module_lines;
  size_t lines = 0;
  for (std::string_view line : text::Lines(text)) {
    std::optional<KallsymsLine> symbol = ParseKallsymsLine(line);
    if (!symbol) continue;
    ++lines;
    uint64_t address = symbol->address;
    std::string_view name = symbol->name;
    if (!symbol->module.empty()) {
      module_lines.append(line);
      module_lines.push_back('\n');
      continue;
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
  }
  if (lines == 0) {
    return absl::InvalidArgumentError("kallsyms: no '<address> <type> <name>' line");
  }
  if (!module_lines.empty()) {
    absl::StatusOr<KallsymsIndex> modules = KallsymsIndex::Parse(module_lines);
    if (modules.ok()) out.modules = std::make_shared<const KallsymsIndex>(*std::move(modules));
  }
  return out;
}

KernelStackSymbolizer::KernelStackSymbolizer(HostPaths paths,
                                             std::shared_ptr<const KallsymsIndex> vmlinux,
                                             std::chrono::seconds module_refresh, Clock clock)
    : paths_(std::move(paths)),
      vmlinux_(std::move(vmlinux)),
      module_refresh_(module_refresh),
      clock_(std::move(clock)) {}

bool KernelStackSymbolizer::InVmlinuxText(uint64_t address) const {
  const KallsymsOutsideVmlinux& o = *outside_;
  if (o.text_begin == 0 || o.text_end == 0) return true;  // bounds unknown: ask vmlinux
  if (address >= o.text_begin && address < o.text_end) return true;
  return o.init_begin != 0 && address >= o.init_begin && address < o.init_end;
}

void KernelStackSymbolizer::RefreshOutside() {
  outside_read_at_ = clock_();
  ++module_reloads_;
  absl::StatusOr<std::string> text = ReadFileToString(paths_.Proc("kallsyms"));
  absl::StatusOr<KallsymsOutsideVmlinux> parsed =
      text.ok() ? ParseKallsymsOutsideVmlinux(*text) : text.status();
  if (!parsed.ok()) {
    spdlog::debug("irqoff: kallsyms for module and BPF frames: {}",
                  std::string(parsed.status().message()));
    if (!outside_) outside_ = KallsymsOutsideVmlinux{};
    return;
  }
  outside_ = *std::move(parsed);
}

std::vector<std::optional<std::string>> KernelStackSymbolizer::Symbolize(
    std::span<const uint64_t> addresses) {
  std::vector<std::optional<std::string>> names;
  names.reserve(addresses.size());
  if (!outside_) RefreshOutside();
  bool refreshed = false;
  for (uint64_t address : addresses) {
    if (InVmlinuxText(address)) {
      names.push_back(vmlinux_ ? vmlinux_->Symbolize(address) : std::nullopt);
      continue;
    }
    // Module or BPF code: programs load and unload at any time, so the index may be stale.
    if (!refreshed && clock_() - *outside_read_at_ >= module_refresh_) {
      RefreshOutside();
      refreshed = true;
    }
    if (outside_->modules && !outside_->modules->AddressesHidden()) {
      names.push_back(outside_->modules->Symbolize(address));
    } else {
      names.push_back(std::nullopt);
    }
  }
  return names;
}

}  // namespace kpath
