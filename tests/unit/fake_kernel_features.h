// The one fake kernel of the unit tests: every KernelFeatures answer is a switch or a set, so a
// test drives each fallback path without the kernel that has (or lacks) the feature.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probes/kernel/host_paths.h"
#include "probes/kernel/kernel_features.h"

namespace kpath {

class FakeKernelFeatures final : public KernelFeatures {
 public:
  bool btf = true;
  bool kprobes = false;
  int possible_cpus = 2;
  std::map<std::string, int, std::less<>> btf_tracepoints;  // event -> argument count
  std::set<std::string, std::less<>> btf_functions;
  std::map<std::string, std::vector<std::string>, std::less<>> btf_params;
  std::map<std::string, uint32_t, std::less<>> btf_members;      // "struct.member" -> byte offset
  std::map<std::string, uint32_t, std::less<>> btf_percpu_vars;  // per-CPU variable -> offset
  std::set<std::string, std::less<>> kallsyms;                   // what KernelFunction() resolves
  std::set<std::string, std::less<>> tracepoints;                // "category/event" the kernel has
  std::map<std::string, TracepointFormat, std::less<>> formats;  // "category/event"
  // The tracefs root; nullopt: Tracefs() and Tracepoint() fail with "no tracefs".
  std::optional<std::filesystem::path> tracefs;
  bool pmu_nmi = false;  // a hardware PMU whose overflow is an NMI
  bool software = true;  // the `software` perf event source
  bool ring_buffer = true;
  bool kvm_steal_time = false;
  bool global_data = true;
  bool atomics = true;
  std::vector<int> online_cpus = {0, 1};
  // A fixture tree (tests/fixtures/linux-*): a listed tracepoint without an entry in `formats`
  // gets its format from <tree>/sys/kernel/tracing/events/.
  std::optional<std::filesystem::path> fixture_tree;

  static std::string Key(std::string_view category, std::string_view event) {
    return std::string(category) + "/" + std::string(event);
  }

  bool HasVmlinuxBtf() override { return btf; }
  std::optional<int> BtfTracepointArgs(std::string_view event) override {
    auto it = btf_tracepoints.find(event);
    if (!btf || it == btf_tracepoints.end()) return std::nullopt;
    return it->second;
  }
  bool BtfHasFunction(std::string_view name) override {
    return btf && btf_functions.count(name) > 0;
  }
  std::optional<std::vector<std::string>> BtfFunctionParams(std::string_view name) override {
    auto it = btf_params.find(name);
    if (!btf || it == btf_params.end()) return std::nullopt;
    return it->second;
  }
  std::optional<uint32_t> BtfMemberOffset(std::string_view struct_name,
                                          std::string_view member) override {
    auto it = btf_members.find(std::string(struct_name) + "." + std::string(member));
    if (!btf || it == btf_members.end()) return std::nullopt;
    return it->second;
  }
  std::optional<uint32_t> BtfPercpuVarOffset(std::string_view var) override {
    auto it = btf_percpu_vars.find(std::string(var));
    if (!btf || it == btf_percpu_vars.end()) return std::nullopt;
    return it->second;
  }
  absl::StatusOr<std::filesystem::path> Tracefs() override {
    if (!tracefs) return absl::UnavailableError("no tracefs");
    return *tracefs;
  }
  absl::StatusOr<TracepointFormat> Tracepoint(std::string_view category,
                                              std::string_view event) override {
    std::string key = Key(category, event);
    if (auto it = formats.find(key); it != formats.end()) return it->second;
    if (!tracefs) return absl::NotFoundError("no tracefs");
    if (!fixture_tree || !tracepoints.count(key)) return absl::NotFoundError("no such tracepoint");
    absl::StatusOr<std::string> text =
        ReadFileToString(*fixture_tree / "sys/kernel/tracing/events" / category / event / "format");
    if (!text.ok()) return text.status();
    return ParseTracepointFormat(*text);
  }
  bool TracepointExists(std::string_view category, std::string_view event) override {
    return tracepoints.count(Key(category, event)) > 0;
  }
  std::optional<std::string> KernelFunction(std::string_view name) override {
    if (kallsyms.count(name)) return std::string(name);
    return std::nullopt;
  }
  absl::Status KprobesAvailable() override {
    return kprobes ? absl::OkStatus() : absl::FailedPreconditionError("no kprobes");
  }
  int PossibleCpus() override { return possible_cpus; }
  std::shared_ptr<const KallsymsIndex> Kallsyms() override { return nullptr; }
  absl::StatusOr<std::vector<int>> OnlineCpus() override { return online_cpus; }
  absl::Status HardwareNmiSampling() override {
    return pmu_nmi ? absl::OkStatus() : absl::UnavailableError("no hardware PMU");
  }
  absl::Status SoftwareCpuClock() override {
    return software ? absl::OkStatus() : absl::UnavailableError("no software events");
  }
  bool HasRingBuffer() override { return ring_buffer; }
  bool HasBpfGlobalData() override { return global_data; }
  bool HasBpfAtomics() override { return atomics; }
  bool KvmStealTimeReadable() override { return kvm_steal_time; }
};

}  // namespace kpath
