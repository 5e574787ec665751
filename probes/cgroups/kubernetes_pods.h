// Which Kubernetes pod and container a process or cgroup belongs to, without the API server:
// from the cgroup path the kubelet and the container runtime gave it, and the kubelet's log
// layout on the node (probes/cgroups/README.md, "Pods"). Labels `namespace`, `pod`, `container`
// of the madvise counters (kubernetes.pod_labels).
//
// Cgroup paths (the pod's uid and the container's id are in them, nothing else is):
//   systemd driver:  /kubepods.slice/kubepods-burstable.slice/
//                      kubepods-burstable-pod<uid, "-" as "_">.slice/cri-containerd-<id>.scope
//                    (crio-<id>.scope for CRI-O, docker-<id>.scope for dockershim/cri-dockerd;
//                    guaranteed pods: kubepods.slice/kubepods-pod<uid>.slice)
//   cgroupfs driver: /kubepods/burstable/pod<uid>/<id>   (crio-<id> for CRI-O)
// anywhere below the hierarchy's root (kubelet.slice/kubelet-kubepods.slice, a cgroup namespace
// that shows it as /../../kubepods...). The kubelet's logs name the rest
// (pkg/kubelet/kuberuntime: BuildContainerLogsDirectory, logSymlink):
//   /var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log
//   /var/log/containers/<pod>_<namespace>_<container>-<id>.log -> the file above
// Namespaces, pod and container names are DNS names: never a "_".
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "probes/kernel/host_paths.h"

namespace kpath {

// The pod and container named by a cgroup path.
struct KubepodsCgroup {
  std::string pod_uid;       // with dashes, as the API and /var/log/pods spell it
  std::string container_id;  // the runtime's id (64 hex digits); "" for the pod's own cgroup
  bool operator==(const KubepodsCgroup&) const = default;
};

// The pod of a cgroup path (any hierarchy, relative or absolute, inside a cgroup namespace too);
// nullopt for a path outside the kubepods tree. A conmon or pause-less helper scope
// (crio-conmon-<id>.scope) belongs to the pod, not to a container.
std::optional<KubepodsCgroup> ParseKubepodsCgroupPath(std::string_view path);

// The pod of the end of a cgroup path whose beginning may be cut (`truncated`: its first
// component is partial), as cgroup_churn's path tails are (their last 127 bytes). A systemd-driver
// container scope is 151+ bytes below kubepods.slice, so its tail often keeps neither the
// kubepods ancestor nor the whole pod uid: a CRI runtime's scope (cri-containerd-<id>.scope,
// crio-<id>.scope, which only Kubernetes' runtimes make) then names its container alone, and
// its pod's uid when the tail still holds the pod slice's "-pod<uid>.slice" (or cgroupfs'
// "pod<uid>") whole. A docker-<id>.scope or a bare id counts only below such a pod component.
std::optional<KubepodsCgroup> ParseKubepodsCgroupTail(std::string_view tail, bool truncated);

// The first kubepods cgroup among the lines of a /proc/PID/cgroup text, any hierarchy.
std::optional<KubepodsCgroup> KubepodsCgroupOfProcess(std::string_view proc_pid_cgroup);

// A /var/log/pods directory name, "<namespace>_<pod>_<uid>".
struct PodLogDirectory {
  std::string namespace_name, pod, uid;
};
std::optional<PodLogDirectory> ParsePodLogDirectoryName(std::string_view name);

// A /var/log/containers file name, "<pod>_<namespace>_<container>-<id>.log".
struct ContainerLogName {
  std::string pod, namespace_name, container, container_id;
};
std::optional<ContainerLogName> ParseContainerLogName(std::string_view name);

// The labels of a pod's process. All empty: not a pod's (or a pod the node's logs do not name).
struct PodLabels {
  std::string namespace_name, pod, container;
  bool empty() const { return pod.empty(); }
  bool operator==(const PodLabels&) const = default;
};

// The kubelet's log layout, read into two maps; read again when a lookup misses: at once (at
// most every 100 ms) for a pod or container not missed before, else at most once per
// `min_rescan`. A pod that started since the last read is found when first looked up (a cgroup
// made once, as cgroup churn counts it, has no next interval to be found in); ids the logs never
// name cost one bounded read per `min_rescan`, or per 100 ms while new ones keep coming.
class PodDirectory {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  PodDirectory(std::filesystem::path pod_logs, std::filesystem::path container_logs,
               std::chrono::milliseconds min_rescan = std::chrono::seconds(5),
               Clock clock = std::chrono::steady_clock::now);

  // Namespace and pod by the pod's uid, container by its id; the container is "" when its id is
  // not in container_logs (the pod's own cgroup, a sandbox). Without a uid (a path tail that
  // lost it), all three from the container's log name. Empty labels for an unknown pod, or an
  // unknown container without a uid. What the last two reads found is known: a pod removed just
  // before a read still names its cgroups' rmdirs.
  PodLabels Lookup(const KubepodsCgroup& cgroup);
  // Pods found by the last read.
  size_t pods() const { return pods_.size(); }

 private:
  void Read();
  std::filesystem::path pod_logs_, container_logs_;
  std::chrono::milliseconds min_rescan_;
  Clock clock_;
  std::optional<std::chrono::steady_clock::time_point> last_read_;
  // Pods and containers a lookup missed since the last read that found them (bounded).
  std::unordered_set<std::string> missed_;
  const PodLogDirectory* FindPod(const std::string& uid) const;
  const ContainerLogName* FindContainer(const std::string& id) const;
  // This read's and the one before (bounded: two reads of a bounded tree).
  std::unordered_map<std::string, PodLogDirectory> pods_, previous_pods_;               // by uid
  std::unordered_map<std::string, ContainerLogName> containers_, previous_containers_;  // by id
};

// What a BPF program keys a process by when pods are labelled (kubernetes.attribute_by).
enum class PodKey {
  kCgroupId,  // the task's cgroup v2 id (bpf_get_current_cgroup_id): pods on cgroup v2, or on
              // a hybrid host whose runtime places them in the unified hierarchy too
  kProcess,   // the process id (tgid), resolved through /proc/PID/cgroup at each drain: cgroup v1
};

// Resolves the owner a BPF key holds (a cgroup id or a process id) to its pod's labels, with
// caches. Shared by the probes (thread-safe).
class PodAttribution {
 public:
  // `cgroup2_root`: where the unified hierarchy is mounted (kCgroupId), searched for ids.
  PodAttribution(PodKey key, HostPaths paths, std::filesystem::path cgroup2_root,
                 PodDirectory directory);

  PodKey key() const { return key_; }
  PodLabels Resolve(uint64_t owner);
  // A process's labels (kProcess's resolution, also for events that carry a pid).
  PodLabels OfProcess(uint32_t pid);
  // A cgroup's labels, from its path (cgroup_churn: the cgroup made or removed).
  PodLabels OfCgroup(const KubepodsCgroup& cgroup);

 private:
  std::optional<std::string> CgroupPath(uint64_t id);
  void ReadCgroupIds();

  PodKey key_;
  HostPaths paths_;
  std::filesystem::path cgroup2_root_;
  std::mutex mu_;
  PodDirectory directory_;
  std::unordered_map<uint64_t, std::string> cgroup_paths_;  // id -> path below cgroup2_root
  std::optional<std::chrono::steady_clock::time_point> last_cgroup_read_;
};

// The pod labels of a folded family (namespace, pod, container, in that order, after the
// family's own): its label names, its top-N and a series' values, when `pods` (labels on).
std::vector<std::string> WithPodLabelNames(std::vector<std::string> names, bool pods);
// `pod_limit` (labels.pod, at least 1) for each of the three: each label is folded alone.
std::vector<size_t> WithPodLabelTopN(std::vector<size_t> top, int pod_limit, bool pods);
void AppendPodLabels(std::vector<std::string>& labels, const PodLabels& pod);

// The pod labels of a probe's series whose BPF keys carry an owner (kpath_owner.h): what the
// probe's BPF object is told to key by, the label names, and each interval's owners resolved
// once. Without an attribution (pods not labelled) it adds nothing and keys carry owner 0.
class PodOwnerLabels {
 public:
  explicit PodOwnerLabels(std::shared_ptr<PodAttribution> pods) : pods_(std::move(pods)) {}
  bool on() const { return pods_ != nullptr; }
  // enum kpath_owner_kind, for the object's owner tunable.
  uint32_t OwnerKind() const;
  // `names` followed by namespace, pod and container when on.
  std::vector<std::string> Names(std::vector<std::string> names) const;
  // `top` followed by the pods' top-N (`pod_limit`) for each of the three when on.
  std::vector<size_t> TopN(std::vector<size_t> top, int pod_limit) const;
  // Appends the owner's namespace, pod and container to `labels` when on (empty values: not a
  // pod's process, or owner 0).
  void Append(std::vector<std::string>& labels, uint64_t owner);
  // After each drain: a cgroup id is never reused, but a process id may be.
  void EndInterval() { owners_.clear(); }

 private:
  std::shared_ptr<PodAttribution> pods_;
  std::unordered_map<uint64_t, PodLabels> owners_;  // this interval's resolved owners
};

// Configuration `kubernetes:` (restart to apply: the BPF programs key by it).
struct KubernetesConfig {
  enum class PodLabelsMode { kAuto, kOn, kOff };
  enum class AttributeBy { kAuto, kCgroupId, kProcess };
  // auto: on when the node runs pods (a kubepods cgroup, or pod log directories).
  PodLabelsMode pod_labels = PodLabelsMode::kAuto;
  // auto: the cgroup v2 id where the unified hierarchy holds the kubepods tree (cgroup v2
  // hosts; hybrid hosts whose runtime uses it), else the process id.
  AttributeBy attribute_by = AttributeBy::kAuto;
  std::string pod_logs = "/var/log/pods";
  std::string container_logs = "/var/log/containers";
  bool operator==(const KubernetesConfig&) const = default;
};

// The attribution the configuration and the host call for: nullptr when pods are not labelled,
// with the reason in `*why` (also set, to what was chosen, when they are).
std::unique_ptr<PodAttribution> MakePodAttribution(const KubernetesConfig& config,
                                                   const HostPaths& paths, std::string* why);

// The id the kernel gives a cgroup v2 directory (what bpf_get_current_cgroup_id returns): its
// kernfs file handle (name_to_handle_at), as bpftool and systemd read it. nullopt on error.
std::optional<uint64_t> CgroupIdOfDirectory(const std::filesystem::path& dir);

}  // namespace kpath
