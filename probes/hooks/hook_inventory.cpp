#include "probes/hooks/hook_inventory.h"

#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <algorithm>
#include <array>

#include "fmt/format.h"

namespace kpath {
namespace {

// Link types newer than the 6.1 uapi headers this builds against (stable kernel ABI values).
constexpr uint32_t kLinkTypeUprobeMulti = 12;  // Linux 6.6

constexpr std::string_view kUnknownOwner = "unknown";
constexpr std::string_view kNoUnit = "none";

std::string StripPrefix(std::string_view s, std::string_view prefix) {
  if (s.starts_with(prefix)) s.remove_prefix(prefix.size());
  return std::string(s);
}

std::string ProgTypeName(uint32_t type) {
  const char* name = libbpf_bpf_prog_type_str(static_cast<enum bpf_prog_type>(type));
  return name ? name : fmt::format("prog_type_{}", type);
}

std::string AttachTypeName(uint32_t type) {
  const char* name = libbpf_bpf_attach_type_str(static_cast<enum bpf_attach_type>(type));
  return name ? name : fmt::format("attach_type_{}", type);
}

std::string LinkTypeName(uint32_t type) {
  const char* name = libbpf_bpf_link_type_str(static_cast<enum bpf_link_type>(type));
  return name ? name : fmt::format("link_type_{}", type);
}

// Owners resolved from the holder maps of the foreign processes.
class Owners {
 public:
  explicit Owners(const BpfHolders& holders) : holders_(holders) {}

  std::pair<std::string, std::string> OfPid(std::optional<pid_t> pid) const {
    if (!pid) return {std::string(kUnknownOwner), std::string(kNoUnit)};
    auto it = holders_.processes.find(*pid);
    if (it == holders_.processes.end() || it->second.comm.empty()) {
      return {std::string(kUnknownOwner), std::string(kNoUnit)};
    }
    return {it->second.comm, it->second.unit.empty() ? std::string(kNoUnit) : it->second.unit};
  }

  std::optional<pid_t> ProgramHolder(uint32_t prog_id) const {
    if (auto it = holders_.programs.find(prog_id); it != holders_.programs.end()) return it->second;
    return std::nullopt;
  }
  std::optional<pid_t> LinkHolder(uint32_t link_id) const {
    if (auto it = holders_.links.find(link_id); it != holders_.links.end()) return it->second;
    return std::nullopt;
  }

 private:
  const BpfHolders& holders_;
};

// One kprobe or uprobe place, for de-duplication across sources.
struct ProbePlace {
  std::string_view kind;  // kprobe, kretprobe, uprobe, uretprobe
  std::string target;
  auto operator<=>(const ProbePlace&) const = default;
};

struct PlaceCounts {
  uint64_t listed = 0;           // kprobes/list entries, kpathd's included
  uint64_t listed_inactive = 0;  // of which [DISABLED] or [GONE]
  uint64_t own = 0;              // kpathd's BPF kprobes here
  uint64_t events = 0;           // tracefs events not kpathd's
  std::vector<std::pair<std::string, std::string>> bpf_owners;  // (owner, unit) per attachment
  std::vector<uint32_t> bpf_programs;
};

class Builder {
 public:
  Builder(const InventoryContext& context) : context_(context) {}

  void AddHook(std::string_view kind, std::string target, std::string owner, std::string unit,
               uint32_t prog_id = 0) {
    ForeignHook hook;
    hook.kind = std::string(kind);
    hook.hot = context_.hot != nullptr && context_.hot->IsHot(kind, target);
    hook.target = std::move(target);
    hook.owner = std::move(owner);
    hook.unit = std::move(unit);
    hook.prog_id = prog_id;
    inventory_.hooks.push_back(std::move(hook));
  }

  std::string Qualify(std::string_view event) const {
    if (event.empty()) return std::string(kUnknownOwner);
    return context_.qualify_tracepoint ? context_.qualify_tracepoint(event) : std::string(event);
  }

  HookInventory& inventory() { return inventory_; }

 private:
  const InventoryContext& context_;
  HookInventory inventory_;
};

// The function a kprobe hits, as a label: module prefix and clone suffix dropped.
std::string KprobeTarget(std::string_view function) {
  if (size_t colon = function.find(':'); colon != std::string_view::npos) {
    function.remove_prefix(colon + 1);
  }
  return std::string(WithoutCloneSuffix(function));
}

std::string UprobeTarget(std::string_view path, uint64_t offset) {
  return fmt::format("{}:0x{:x}", path, offset);
}

std::optional<ProbePlace> PlaceOfAttachment(const TaskFdQuery& query) {
  switch (query.fd_type) {
    case BPF_FD_TYPE_KPROBE:
    case BPF_FD_TYPE_KRETPROBE: {
      std::string target =
          query.name.empty() ? fmt::format("0x{:x}", query.probe_addr) : KprobeTarget(query.name);
      return ProbePlace{
          query.fd_type == BPF_FD_TYPE_KPROBE ? hook_kind::kKprobe : hook_kind::kKretprobe,
          std::move(target)};
    }
    case BPF_FD_TYPE_UPROBE:
    case BPF_FD_TYPE_URETPROBE:
      return ProbePlace{
          query.fd_type == BPF_FD_TYPE_UPROBE ? hook_kind::kUprobe : hook_kind::kUretprobe,
          UprobeTarget(query.name, query.probe_offset)};
    default:
      return std::nullopt;
  }
}

bool IsTracingProgramType(uint32_t type) {
  switch (type) {
    case BPF_PROG_TYPE_KPROBE:
    case BPF_PROG_TYPE_TRACEPOINT:
    case BPF_PROG_TYPE_RAW_TRACEPOINT:
    case BPF_PROG_TYPE_RAW_TRACEPOINT_WRITABLE:
    case BPF_PROG_TYPE_PERF_EVENT:
    case BPF_PROG_TYPE_TRACING:
    case BPF_PROG_TYPE_LSM:
    case BPF_PROG_TYPE_EXT:
    case BPF_PROG_TYPE_SYSCALL:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::span<const std::string_view> HookKinds() {
  static constexpr std::array<std::string_view, 12> kKinds = {
      hook_kind::kKprobe,     hook_kind::kKretprobe,     hook_kind::kUprobe, hook_kind::kUretprobe,
      hook_kind::kTracepoint, hook_kind::kRawTracepoint, hook_kind::kFentry, hook_kind::kFexit,
      hook_kind::kPerfEvent,  hook_kind::kLsm,           hook_kind::kFtrace, hook_kind::kOther};
  return kKinds;
}

std::string_view WithoutCloneSuffix(std::string_view function) {
  // A C identifier has no '.': everything after one is a compiler suffix (.isra.0, .cold, ...).
  return function.substr(0, function.find('.'));
}

HotTargets::HotTargets(const std::vector<std::string>& entries) {
  for (const std::string& entry : entries) {
    if (size_t colon = entry.find(':'); colon != std::string::npos) {
      tracepoints_.insert(entry);
      tracepoint_events_.insert(entry.substr(colon + 1));
    } else {
      functions_.insert(entry);
    }
  }
}

bool HotTargets::IsHot(std::string_view kind, std::string_view target) const {
  if (kind == hook_kind::kTracepoint || kind == hook_kind::kRawTracepoint) {
    if (tracepoints_.contains(target)) return true;
    size_t colon = target.find(':');
    return tracepoint_events_.contains(colon == std::string_view::npos ? target
                                                                       : target.substr(colon + 1));
  }
  if (kind == hook_kind::kLsm) {
    return functions_.contains(fmt::format("security_{}", target)) ||
           functions_.contains(fmt::format("bpf_lsm_{}", target));
  }
  if (kind == hook_kind::kKprobe || kind == hook_kind::kKretprobe || kind == hook_kind::kFentry ||
      kind == hook_kind::kFexit || kind == hook_kind::kFtrace) {
    std::string_view function = target.substr(0, target.find('+'));
    return functions_.contains(WithoutCloneSuffix(function));
  }
  return false;
}

HookInventory BuildHookInventory(const TracingSources& tracing, const BpfSources* bpf,
                                 const InventoryContext& context) {
  Builder builder(context);
  std::map<ProbePlace, PlaceCounts> places;
  const std::string own_event_prefix = fmt::format("libbpf_{}_", context.own_pid);
  std::map<std::string, uint64_t> fprobes_by_function;
  std::set<std::string> trampoline_functions;  // fentry/fexit/LSM targets: one ftrace user each

  if (bpf != nullptr) {
    // kpathd's own objects: whatever its process holds, and what those links and perf events run.
    std::set<uint32_t> own_programs, own_links;
    for (const auto& [id, pid] : bpf->own.programs) own_programs.insert(id);
    for (const auto& [id, pid] : bpf->own.links) own_links.insert(id);
    for (const BpfLinkInfo& link : bpf->links) {
      if (own_links.contains(link.id)) own_programs.insert(link.prog_id);
    }
    for (const FdAttachment& attachment : bpf->own.attachments) {
      own_programs.insert(attachment.query.prog_id);
      if (std::optional<ProbePlace> place = PlaceOfAttachment(attachment.query)) {
        ++places[*place].own;
      }
    }

    Owners owners(bpf->foreign);
    std::map<uint32_t, const BpfProgramInfo*> programs;
    for (const BpfProgramInfo& program : bpf->programs) programs[program.id] = &program;
    std::set<uint32_t> covered;                          // programs represented by an attachment
    std::map<uint32_t, std::optional<pid_t>> holder_of;  // program -> best-known holder

    // Perf events and (pre-5.8) raw tracepoint fds with a program on them.
    std::set<uint32_t> perf_attached;
    for (const FdAttachment& attachment : bpf->foreign.attachments) {
      uint32_t prog_id = attachment.query.prog_id;
      if (own_programs.contains(prog_id)) continue;
      covered.insert(prog_id);
      perf_attached.insert(prog_id);
      holder_of.emplace(prog_id, attachment.pid);
      auto [owner, unit] = owners.OfPid(attachment.pid);
      const TaskFdQuery& query = attachment.query;
      if (std::optional<ProbePlace> place = PlaceOfAttachment(query)) {
        PlaceCounts& counts = places[*place];
        counts.bpf_owners.emplace_back(std::move(owner), std::move(unit));
        counts.bpf_programs.push_back(prog_id);
      } else if (query.fd_type == BPF_FD_TYPE_TRACEPOINT) {
        builder.AddHook(hook_kind::kTracepoint, builder.Qualify(query.name), owner, unit, prog_id);
      } else if (query.fd_type == BPF_FD_TYPE_RAW_TRACEPOINT) {
        builder.AddHook(hook_kind::kRawTracepoint, builder.Qualify(query.name), owner, unit,
                        prog_id);
      } else {
        builder.AddHook(hook_kind::kPerfEvent, "perf_event", owner, unit, prog_id);
      }
    }

    for (const BpfLinkInfo& link : bpf->links) {
      if (own_links.contains(link.id) || own_programs.contains(link.prog_id)) continue;
      std::optional<pid_t> holder = owners.LinkHolder(link.id);
      if (!holder) holder = owners.ProgramHolder(link.prog_id);
      holder_of.emplace(link.prog_id, holder);
      auto [owner, unit] = owners.OfPid(holder);
      const BpfProgramInfo* program =
          programs.contains(link.prog_id) ? programs[link.prog_id] : nullptr;
      covered.insert(link.prog_id);
      switch (link.type) {
        case BPF_LINK_TYPE_RAW_TRACEPOINT:
          builder.AddHook(hook_kind::kRawTracepoint, builder.Qualify(link.tp_name), owner, unit,
                          link.prog_id);
          break;
        case BPF_LINK_TYPE_TRACING: {
          std::string name;
          if (auto it = bpf->btf_names.find({link.target_obj_id, link.target_btf_id});
              link.target_btf_id != 0 && it != bpf->btf_names.end()) {
            name = it->second;
          } else if (program != nullptr) {
            auto p = bpf->btf_names.find({program->attach_btf_obj_id, program->attach_btf_id});
            if (p != bpf->btf_names.end()) name = p->second;
          }
          std::string_view kind = hook_kind::kFentry;
          if (link.attach_type == BPF_TRACE_FEXIT) kind = hook_kind::kFexit;
          if (link.attach_type == BPF_LSM_MAC || link.attach_type == BPF_LSM_CGROUP ||
              (program != nullptr && program->type == BPF_PROG_TYPE_LSM)) {
            kind = hook_kind::kLsm;
          }
          if (link.attach_type == BPF_TRACE_ITER) kind = hook_kind::kOther;
          if (name.empty()) name = std::string(kUnknownOwner);
          if (kind == hook_kind::kLsm) {
            name = StripPrefix(name, "bpf_lsm_");
          } else if (kind != hook_kind::kOther) {
            trampoline_functions.insert(std::string(WithoutCloneSuffix(name)));
          }
          builder.AddHook(kind, kind == hook_kind::kOther ? "iter:" + name : name, owner, unit,
                          link.prog_id);
          break;
        }
        case BPF_LINK_TYPE_PERF_EVENT:
          // The perf event's fd, found above, says more (tracepoint or probe and where).
          if (perf_attached.contains(link.prog_id)) break;
          if (program != nullptr && program->type == BPF_PROG_TYPE_KPROBE) {
            builder.AddHook(hook_kind::kKprobe, std::string(kUnknownOwner), owner, unit,
                            link.prog_id);
            ++builder.inventory().hidden_kprobes;
          } else if (program != nullptr && program->type == BPF_PROG_TYPE_TRACEPOINT) {
            builder.AddHook(hook_kind::kTracepoint, std::string(kUnknownOwner), owner, unit,
                            link.prog_id);
          } else {
            builder.AddHook(hook_kind::kPerfEvent, "perf_event", owner, unit, link.prog_id);
          }
          break;
        case BPF_LINK_TYPE_KPROBE_MULTI:
          // One link, many functions (their list needs uapi newer than 6.1): counted once.
          builder.AddHook(hook_kind::kKprobe, "kprobe_multi", owner, unit, link.prog_id);
          ++builder.inventory().hidden_kprobes;
          break;
        case kLinkTypeUprobeMulti:
          builder.AddHook(hook_kind::kUprobe, "uprobe_multi", owner, unit, link.prog_id);
          break;
        case BPF_LINK_TYPE_CGROUP:
          builder.AddHook(hook_kind::kOther, "cgroup:" + AttachTypeName(link.attach_type), owner,
                          unit, link.prog_id);
          break;
        default:
          builder.AddHook(hook_kind::kOther, LinkTypeName(link.type), owner, unit, link.prog_id);
          break;
      }
    }

    for (const BpfProgramInfo& program : bpf->programs) {
      if (own_programs.contains(program.id)) continue;
      std::optional<pid_t> holder = owners.ProgramHolder(program.id);
      if (!holder) {
        if (auto it = holder_of.find(program.id); it != holder_of.end()) holder = it->second;
      }
      auto [owner, unit] = owners.OfPid(holder);
      // Tracing programs hook nothing until attached (and every attachment was found above);
      // cgroup, network and other programs are attached in ways the bpf syscall does not list
      // cheaply (netlink, BPF_PROG_QUERY per cgroup), so each counts as one hook of its type.
      if (!covered.contains(program.id) && !IsTracingProgramType(program.type)) {
        builder.AddHook(hook_kind::kOther, ProgTypeName(program.type), owner, unit, program.id);
      }
      builder.inventory().programs.push_back(
          ForeignProgram{program.id, owner, program.name.empty() ? "unnamed" : program.name,
                         program.run_time_ns, program.run_count});
    }
  }

  // kprobes/list: everything registered, whoever did it.
  if (tracing.kprobe_list) {
    for (const KprobeListEntry& entry : tracing.kprobe_list->entries) {
      ProbePlace place{entry.is_return ? hook_kind::kKretprobe : hook_kind::kKprobe,
                       KprobeTarget(entry.function)};
      PlaceCounts& counts = places[place];
      ++counts.listed;
      if (entry.disabled || entry.gone) ++counts.listed_inactive;
    }
  }
  for (const ProbeEvent& event : tracing.probe_events) {
    if (event.event.starts_with(own_event_prefix)) continue;  // kpathd's, through libbpf
    switch (event.type) {
      case ProbeEventType::kKprobe:
      case ProbeEventType::kKretprobe:
        ++places[ProbePlace{event.type == ProbeEventType::kKprobe ? hook_kind::kKprobe
                                                                  : hook_kind::kKretprobe,
                            event.by_address ? event.target : KprobeTarget(event.target)}]
              .events;
        break;
      case ProbeEventType::kUprobe:
      case ProbeEventType::kUretprobe:
        ++places[ProbePlace{event.type == ProbeEventType::kUprobe ? hook_kind::kUprobe
                                                                  : hook_kind::kUretprobe,
                            UprobeTarget(event.target, event.offset)}]
              .events;
        break;
      case ProbeEventType::kFprobe:
      case ProbeEventType::kFprobeReturn: {
        std::string function = KprobeTarget(event.target);
        ++fprobes_by_function[function];
        builder.AddHook(hook_kind::kFtrace, function, std::string(kUnknownOwner),
                        std::string(kNoUnit));
        break;
      }
      case ProbeEventType::kTracepointProbe:
        builder.AddHook(hook_kind::kTracepoint, builder.Qualify(event.target),
                        std::string(kUnknownOwner), std::string(kNoUnit));
        break;
      case ProbeEventType::kOther:
        break;
    }
  }

  // One hook per probe at each place; BPF attachments name their owner.
  std::set<std::string> ftrace_kprobe_functions;
  if (tracing.kprobe_list) {
    for (const KprobeListEntry& entry : tracing.kprobe_list->entries) {
      if (entry.ftrace) ftrace_kprobe_functions.insert(KprobeTarget(entry.function));
    }
  }
  for (const auto& [place, counts] : places) {
    uint64_t listed = counts.listed > counts.own ? counts.listed - counts.own : 0;
    uint64_t total = std::max({listed, counts.events, uint64_t{counts.bpf_owners.size()}});
    for (size_t i = 0; i < counts.bpf_owners.size(); ++i) {
      builder.AddHook(place.kind, place.target, counts.bpf_owners[i].first,
                      counts.bpf_owners[i].second, counts.bpf_programs[i]);
    }
    for (uint64_t i = counts.bpf_owners.size(); i < total; ++i) {
      builder.AddHook(place.kind, place.target, std::string(kUnknownOwner), std::string(kNoUnit));
    }
    if (place.kind == hook_kind::kKprobe || place.kind == hook_kind::kKretprobe) {
      builder.inventory().hidden_kprobes += total;
      builder.inventory().hidden_kprobes_disabled += std::min(total, counts.listed_inactive);
    }
  }

  // ftrace users that are neither kprobes on the call site, BPF trampolines nor fprobe events:
  // the function tracers, livepatches and modules with their own ftrace_ops.
  if (tracing.enabled_functions) {
    for (const FtraceFunction& function : tracing.enabled_functions->functions) {
      std::string name(WithoutCloneSuffix(function.function));
      int64_t users = function.users;
      if (function.direct || trampoline_functions.contains(name)) --users;
      if (function.kprobe || ftrace_kprobe_functions.contains(name)) --users;
      if (auto it = fprobes_by_function.find(name); it != fprobes_by_function.end()) {
        users -= static_cast<int64_t>(it->second);
      }
      for (int64_t i = 0; i < users; ++i) {
        builder.AddHook(hook_kind::kFtrace, name, std::string(kUnknownOwner), std::string(kNoUnit));
      }
    }
  }
  return std::move(builder.inventory());
}

}  // namespace kpath
