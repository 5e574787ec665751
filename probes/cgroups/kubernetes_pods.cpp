#include "probes/cgroups/kubernetes_pods.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <vector>

#include "fmt/format.h"
#include "probes/bpf/kpath_owner.h"
#include "probes/cgroups/cgroup_files.h"
#include "probes/kernel/text.h"

namespace kpath {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool ConsumePrefix(std::string_view* s, std::string_view p) {
  if (!StartsWith(*s, p)) return false;
  s->remove_prefix(p.size());
  return true;
}
bool ConsumeSuffix(std::string_view* s, std::string_view p) {
  if (!EndsWith(*s, p)) return false;
  s->remove_suffix(p.size());
  return true;
}
// The non-empty fields of `s` between `sep`s.
std::vector<std::string_view> NonEmpty(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (std::string_view f : text::Split(s, sep)) {
    if (!f.empty()) out.push_back(f);
  }
  return out;
}

// "kubepods", "kubepods.slice", "kubepods-burstable.slice", "kubelet-kubepods.slice".
bool NamesKubepods(std::string_view name) {
  return StartsWith(name, "kubepods") || name.find("-kubepods") != std::string_view::npos;
}

// A pod's uid: hex digits and dashes (a UUID; a static pod's is a 32-digit hash).
bool IsUid(std::string_view s) {
  return s.size() >= 8 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
         });
}

bool IsHexId(std::string_view s) {
  return s.size() >= 12 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The uid of a systemd-driver pod slice's name, "...-pod<uid, "-" as "_">.slice".
std::optional<std::string> PodUidOfSlice(std::string_view c) {
  if (!ConsumeSuffix(&c, ".slice")) return std::nullopt;
  // kind and kubelet-in-a-slice setups prefix it: "kubelet-kubepods-besteffort-pod<uid_>.slice".
  size_t pod = c.rfind("-pod");
  if (pod == std::string_view::npos) return std::nullopt;
  std::string uid(c.substr(pod + 4));
  std::replace(uid.begin(), uid.end(), '_', '-');
  if (!IsUid(uid)) return std::nullopt;
  return uid;
}

// The pod uid a path component names: "kubepods-burstable-pod<uid_>.slice",
// "kubepods-pod<uid_>.slice" (systemd driver) or "pod<uid>" (cgroupfs driver).
std::optional<std::string> PodUidOfComponent(std::string_view c) {
  if (NamesKubepods(c) && EndsWith(c, ".slice")) return PodUidOfSlice(c);
  if (ConsumePrefix(&c, "pod") && IsUid(c)) return std::string(c);
  return std::nullopt;
}

// The container id a pod's child component names, or "" (conmon, an unknown runtime's helper).
std::string ContainerIdOfComponent(std::string_view c) {
  ConsumeSuffix(&c, ".scope");
  if (StartsWith(c, "crio-conmon-")) return "";
  for (std::string_view prefix : {"cri-containerd-", "crio-", "docker-", "libpod-"}) {
    if (ConsumePrefix(&c, prefix)) break;
  }
  return IsHexId(c) ? std::string(c) : "";
}

}  // namespace

std::optional<KubepodsCgroup> ParseKubepodsCgroupPath(std::string_view path) {
  std::vector<std::string_view> parts = NonEmpty(path, '/');
  bool below_kubepods = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    // Every layout has a "kubepods..." ancestor (or is one, the systemd driver's pod slice).
    below_kubepods = below_kubepods || NamesKubepods(parts[i]);
    if (!below_kubepods) continue;
    std::optional<std::string> uid = PodUidOfComponent(parts[i]);
    if (!uid) continue;
    KubepodsCgroup out;
    out.pod_uid = std::move(*uid);
    if (i + 1 < parts.size()) out.container_id = ContainerIdOfComponent(parts[i + 1]);
    return out;
  }
  return std::nullopt;
}

namespace {
// The CRI runtimes' container scopes: Kubernetes' alone (docker-<id>.scope is Docker's too).
std::string CriContainerIdOfScope(std::string_view c) {
  if (!ConsumeSuffix(&c, ".scope") || StartsWith(c, "crio-conmon-")) return "";
  if (!ConsumePrefix(&c, "cri-containerd-") && !ConsumePrefix(&c, "crio-")) return "";
  return IsHexId(c) ? std::string(c) : "";
}

// The uid of a pod component in a tail cut short, where the "kubepods" ancestor is gone:
// "...-pod<uid_>.slice" (its uid is whole when "-pod" is still there) or a whole "pod<uid>";
// only a full-length uid (a UUID, or a static pod's 32-digit hash), not any "-pod<hex>" slice.
std::optional<std::string> PodUidOfTailComponent(std::string_view c, bool whole) {
  std::optional<std::string> uid = PodUidOfSlice(c);
  if (!uid && whole && ConsumePrefix(&c, "pod") && IsUid(c)) uid = std::string(c);
  if (!uid || uid->size() < 32) return std::nullopt;
  return uid;
}
}  // namespace

std::optional<KubepodsCgroup> ParseKubepodsCgroupTail(std::string_view tail, bool truncated) {
  if (std::optional<KubepodsCgroup> whole = ParseKubepodsCgroupPath(tail)) return whole;
  if (!truncated) return std::nullopt;
  std::vector<std::string_view> parts = NonEmpty(tail, '/');
  // The deepest pod component, then its child (a container, or the pod's own cgroup).
  for (size_t i = parts.size(); i-- > 0;) {
    if (std::optional<std::string> uid = PodUidOfTailComponent(parts[i], i > 0)) {
      KubepodsCgroup out{std::move(*uid), ""};
      if (i + 1 < parts.size()) out.container_id = ContainerIdOfComponent(parts[i + 1]);
      return out;
    }
  }
  // No pod component left: a CRI container scope alone (or a cgroup below one).
  for (size_t i = parts.size(); i-- > 1;) {  // parts[0] is cut: not a whole name
    if (std::string id = CriContainerIdOfScope(parts[i]); !id.empty()) {
      return KubepodsCgroup{"", std::move(id)};
    }
  }
  return std::nullopt;
}

std::optional<KubepodsCgroup> KubepodsCgroupOfProcess(std::string_view proc_pid_cgroup) {
  for (std::string_view line : NonEmpty(proc_pid_cgroup, '\n')) {
    // "hierarchy-id:controllers:path"; the path may itself hold ':' (never here, but keep it).
    size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    if (auto pod = ParseKubepodsCgroupPath(line.substr(second + 1))) return pod;
  }
  return std::nullopt;
}

std::optional<PodLogDirectory> ParsePodLogDirectoryName(std::string_view name) {
  std::vector<std::string_view> parts = text::Split(name, '_');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || !IsUid(parts[2])) {
    return std::nullopt;
  }
  return PodLogDirectory{std::string(parts[0]), std::string(parts[1]), std::string(parts[2])};
}

std::optional<ContainerLogName> ParseContainerLogName(std::string_view name) {
  if (!ConsumeSuffix(&name, ".log")) return std::nullopt;
  size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || !IsHexId(name.substr(dash + 1))) return std::nullopt;
  std::vector<std::string_view> parts = text::Split(name.substr(0, dash), '_');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) {
    return std::nullopt;
  }
  return ContainerLogName{std::string(parts[0]), std::string(parts[1]), std::string(parts[2]),
                          std::string(name.substr(dash + 1))};
}

PodDirectory::PodDirectory(std::filesystem::path pod_logs, std::filesystem::path container_logs,
                           std::chrono::milliseconds min_rescan, Clock clock)
    : pod_logs_(std::move(pod_logs)),
      container_logs_(std::move(container_logs)),
      min_rescan_(min_rescan),
      clock_(clock ? std::move(clock) : Clock(std::chrono::steady_clock::now)) {}

namespace {

// Calls `visit` with each entry name of a directory, at most `limit` of them; nothing on error.
template <typename Visit>
void ForEachName(const std::filesystem::path& dir, size_t limit, Visit visit) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (size_t n = 0; !ec && it != end && n < limit; it.increment(ec), ++n) {
    visit(it->path().filename().string());
  }
}

// A node runs at most a few hundred pods (kubelet's maxPods defaults to 110); these bound what a
// stray or hostile directory can cost a read.
constexpr size_t kMaxLogEntries = 100000;
// A lookup of a pod or container not missed before reads the logs again after this long.
constexpr std::chrono::milliseconds kMinFreshRescan(100);

}  // namespace

void PodDirectory::Read() {
  last_read_ = clock_();
  previous_pods_ = std::move(pods_);
  previous_containers_ = std::move(containers_);
  pods_.clear();
  containers_.clear();
  ForEachName(pod_logs_, kMaxLogEntries, [&](const std::string& name) {
    if (auto pod = ParsePodLogDirectoryName(name)) pods_[pod->uid] = std::move(*pod);
  });
  ForEachName(container_logs_, kMaxLogEntries, [&](const std::string& name) {
    if (auto c = ParseContainerLogName(name)) containers_[c->container_id] = std::move(*c);
  });
}

const PodLogDirectory* PodDirectory::FindPod(const std::string& uid) const {
  if (auto it = pods_.find(uid); it != pods_.end()) return &it->second;
  if (auto it = previous_pods_.find(uid); it != previous_pods_.end()) return &it->second;
  return nullptr;
}

const ContainerLogName* PodDirectory::FindContainer(const std::string& id) const {
  if (id.empty()) return nullptr;
  if (auto it = containers_.find(id); it != containers_.end()) return &it->second;
  if (auto it = previous_containers_.find(id); it != previous_containers_.end()) {
    return &it->second;
  }
  return nullptr;
}

PodLabels PodDirectory::Lookup(const KubepodsCgroup& cgroup) {
  auto known = [&] {
    return (cgroup.pod_uid.empty() || FindPod(cgroup.pod_uid)) &&
           (cgroup.container_id.empty() || FindContainer(cgroup.container_id));
  };
  if (!known()) {
    const std::string key = cgroup.pod_uid + "/" + cgroup.container_id;
    const bool fresh = !missed_.contains(key);
    const auto since =
        last_read_ ? clock_() - *last_read_ : std::chrono::steady_clock::duration::max();
    if (since >= min_rescan_ || (fresh && since >= kMinFreshRescan)) {
      Read();
      if (missed_.size() >= kMaxLogEntries) missed_.clear();
      if (!known()) missed_.insert(key);  // not named: read again only after min_rescan
    }
  }
  PodLabels out;
  const ContainerLogName* container = FindContainer(cgroup.container_id);
  if (cgroup.pod_uid.empty()) {
    // A path tail that lost the pod's uid: the container's log name has all three.
    if (container) out = {container->namespace_name, container->pod, container->container};
    return out;
  }
  if (const PodLogDirectory* pod = FindPod(cgroup.pod_uid)) {
    out.namespace_name = pod->namespace_name;
    out.pod = pod->pod;
  } else {
    // A pod the logs do not name (they are not mounted, or it is gone): its uid still tells
    // which pod it was (kubectl get pods -A -o
    // custom-columns=UID:.metadata.uid,NAME:.metadata.name).
    out.pod = cgroup.pod_uid;
  }
  if (container) out.container = container->container;
  return out;
}

std::optional<uint64_t> CgroupIdOfDirectory(const std::filesystem::path& dir) {
  struct {
    struct file_handle handle;
    unsigned char bytes[64];
  } h{};
  h.handle.handle_bytes = sizeof(h.bytes);
  int mount_id = 0;
  if (name_to_handle_at(AT_FDCWD, dir.c_str(), &h.handle, &mount_id, 0) != 0) return std::nullopt;
  if (h.handle.handle_bytes < sizeof(uint64_t)) return std::nullopt;
  uint64_t id = 0;
  std::memcpy(&id, h.handle.f_handle, sizeof(id));
  return id;
}

PodAttribution::PodAttribution(PodKey key, HostPaths paths, std::filesystem::path cgroup2_root,
                               PodDirectory directory)
    : key_(key),
      paths_(std::move(paths)),
      cgroup2_root_(std::move(cgroup2_root)),
      directory_(std::move(directory)) {}

namespace {
// Cgroups walked in one read of the unified hierarchy: hosts have thousands, not millions.
constexpr size_t kMaxCgroups = 1 << 20;
constexpr std::chrono::seconds kMinCgroupRead(1);
}  // namespace

void PodAttribution::ReadCgroupIds() {
  last_cgroup_read_ = std::chrono::steady_clock::now();
  cgroup_paths_.clear();
  // Paths relative to the hierarchy's root (the root itself ""): only their components matter.
  if (auto root = CgroupIdOfDirectory(cgroup2_root_)) cgroup_paths_[*root].clear();
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(cgroup2_root_, ec), end;
  for (size_t n = 0; !ec && it != end && n < kMaxCgroups; it.increment(ec), ++n) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) {
      ec.clear();
      continue;
    }
    if (auto id = CgroupIdOfDirectory(it->path())) {
      cgroup_paths_[*id] = it->path().lexically_relative(cgroup2_root_).string();
    }
  }
}

std::optional<std::string> PodAttribution::CgroupPath(uint64_t id) {
  auto it = cgroup_paths_.find(id);
  if (it == cgroup_paths_.end() &&
      (!last_cgroup_read_ ||
       std::chrono::steady_clock::now() - *last_cgroup_read_ >= kMinCgroupRead)) {
    ReadCgroupIds();
    it = cgroup_paths_.find(id);
  }
  if (it == cgroup_paths_.end()) return std::nullopt;
  return it->second;
}

uint32_t PodOwnerLabels::OwnerKind() const {
  if (!pods_) return KPATH_OWNER_NONE;
  return pods_->key() == PodKey::kCgroupId ? KPATH_OWNER_CGROUP_ID : KPATH_OWNER_TGID;
}

std::vector<std::string> WithPodLabelNames(std::vector<std::string> names, bool pods) {
  if (pods) names.insert(names.end(), {"namespace", "pod", "container"});
  return names;
}

std::vector<size_t> WithPodLabelTopN(std::vector<size_t> top, int pod_limit, bool pods) {
  if (pods) top.insert(top.end(), 3, static_cast<size_t>(std::max(pod_limit, 1)));
  return top;
}

void AppendPodLabels(std::vector<std::string>& labels, const PodLabels& pod) {
  labels.insert(labels.end(), {pod.namespace_name, pod.pod, pod.container});
}

std::vector<std::string> PodOwnerLabels::Names(std::vector<std::string> names) const {
  return WithPodLabelNames(std::move(names), on());
}

std::vector<size_t> PodOwnerLabels::TopN(std::vector<size_t> top, int pod_limit) const {
  return WithPodLabelTopN(std::move(top), pod_limit, on());
}

void PodOwnerLabels::Append(std::vector<std::string>& labels, uint64_t owner) {
  if (!pods_) return;
  auto [it, fresh] = owners_.try_emplace(owner);
  if (fresh && owner != 0) it->second = pods_->Resolve(owner);
  AppendPodLabels(labels, it->second);
}

PodLabels PodAttribution::Resolve(uint64_t owner) {
  if (key_ == PodKey::kProcess) return OfProcess(static_cast<uint32_t>(owner));
  std::lock_guard lock(mu_);
  std::optional<std::string> path = CgroupPath(owner);
  if (!path) return {};
  std::optional<KubepodsCgroup> pod = ParseKubepodsCgroupPath(*path);
  if (!pod) return {};
  return directory_.Lookup(*pod);
}

PodLabels PodAttribution::OfCgroup(const KubepodsCgroup& cgroup) {
  std::lock_guard lock(mu_);
  return directory_.Lookup(cgroup);
}

PodLabels PodAttribution::OfProcess(uint32_t pid) {
  if (pid == 0) return {};
  absl::StatusOr<std::string> text =
      ReadFileToString(paths_.Proc(std::to_string(pid) + "/cgroup"), 64 << 10);
  if (!text.ok()) return {};
  std::optional<KubepodsCgroup> pod = KubepodsCgroupOfProcess(*text);
  if (!pod) return {};
  std::lock_guard lock(mu_);
  return directory_.Lookup(*pod);
}

}  // namespace kpath

namespace kpath {
namespace {

// A directory of a cgroup mount, down to depth 2, whose name starts with "kubepods" (kubepods,
// kubepods.slice, kubelet.slice/kubelet-kubepods.slice): the kubelet's tree.
bool HasKubepods(const std::filesystem::path& mount) {
  bool found = false;
  ForEachName(mount, kMaxLogEntries, [&](const std::string& name) {
    if (found) return;
    if (NamesKubepods(name)) {
      found = true;
    } else if (EndsWith(name, ".slice")) {
      ForEachName(mount / name, kMaxLogEntries,
                  [&](const std::string& child) { found = found || NamesKubepods(child); });
    }
  });
  return found;
}

}  // namespace

std::unique_ptr<PodAttribution> MakePodAttribution(const KubernetesConfig& config,
                                                   const HostPaths& paths, std::string* why) {
  using Mode = KubernetesConfig::PodLabelsMode;
  using By = KubernetesConfig::AttributeBy;
  if (config.pod_labels == Mode::kOff) {
    *why = "kubernetes.pod_labels is off";
    return nullptr;
  }
  std::vector<CgroupMount> mounts;
  if (absl::StatusOr<std::string> text = ReadFileToString(paths.Proc("self/mountinfo"));
      text.ok()) {
    if (auto parsed = ParseCgroupMounts(*text); parsed.ok()) mounts = std::move(*parsed);
  }
  std::optional<std::filesystem::path> unified;
  bool v1 = false, kubepods = false, unified_kubepods = false;
  for (const CgroupMount& m : mounts) {
    bool here = HasKubepods(m.mount_point);
    kubepods = kubepods || here;
    if (m.version == 2 && !unified) {
      unified = m.mount_point;
      unified_kubepods = here;
    }
    v1 = v1 || m.version == 1;
  }
  bool pod_logs = false;
  ForEachName(config.pod_logs, 1000, [&](const std::string& name) {
    pod_logs = pod_logs || ParsePodLogDirectoryName(name).has_value();
  });
  if (config.pod_labels == Mode::kAuto && !kubepods && !pod_logs) {
    *why = fmt::format(
        "no Kubernetes pods on this node (no kubepods cgroup, no pod directory in {}): "
        "kubernetes.pod_labels auto leaves them off",
        config.pod_logs);
    return nullptr;
  }
  PodKey key = PodKey::kProcess;
  if (config.attribute_by == By::kCgroupId) {
    if (!unified) {
      *why = "kubernetes.attribute_by is cgroup_id but no cgroup v2 hierarchy is mounted";
      return nullptr;
    }
    key = PodKey::kCgroupId;
  } else if (config.attribute_by == By::kAuto && unified && (unified_kubepods || !v1)) {
    key = PodKey::kCgroupId;
  }
  *why = key == PodKey::kCgroupId
             ? fmt::format("by cgroup v2 id (unified hierarchy at {}), names from {} and {}",
                           unified->string(), config.pod_logs, config.container_logs)
             : fmt::format("by process id through /proc/PID/cgroup, names from {} and {}",
                           config.pod_logs, config.container_logs);
  return std::make_unique<PodAttribution>(
      key, paths, key == PodKey::kCgroupId ? *unified : std::filesystem::path(),
      PodDirectory(config.pod_logs, config.container_logs));
}

}  // namespace kpath
