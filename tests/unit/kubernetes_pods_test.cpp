// Pod attribution from the kubelet's layouts: cgroup paths of the systemd and cgroupfs drivers
// (containerd, CRI-O, dockershim, kind's nested kubelet, a cgroup namespace's relative view),
// /var/log/pods and /var/log/containers names, and the whole resolution over the fixture node of
// tests/fixtures/kubernetes (README there says where each layout comes from).
#include "probes/cgroups/kubernetes_pods.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

namespace kpath {
namespace {

const std::filesystem::path kNode = std::filesystem::path(KPATH_FIXTURES) / "kubernetes";
constexpr std::string_view kGatewayId =
    "3f1e9a7c2b4d6e8f0a1c3e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f";
constexpr std::string_view kSearchId =
    "7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d";

TEST_CASE("kubepods cgroup paths of every driver and runtime name the pod and container",
          "[kubernetes]") {
  struct Case {
    std::string path;
    std::optional<KubepodsCgroup> want;
  };
  const std::string id(kGatewayId);
  const std::vector<Case> cases{
      // systemd driver, containerd; burstable and guaranteed QoS
      {"/kubepods.slice/kubepods-burstable.slice/"
       "kubepods-burstable-pod6b3c0d4e_8f2a_4c1b_9d7e_2a5f1c3b4d6e.slice/cri-containerd-" +
           id + ".scope",
       KubepodsCgroup{"6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e", id}},
      {"/kubepods.slice/kubepods-pod6b3c0d4e_8f2a_4c1b_9d7e_2a5f1c3b4d6e.slice/crio-" + id +
           ".scope",
       KubepodsCgroup{"6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e", id}},
      {"/kubepods.slice/kubepods-besteffort.slice/"
       "kubepods-besteffort-pod6b3c0d4e_8f2a_4c1b_9d7e_2a5f1c3b4d6e.slice/docker-" +
           id + ".scope",
       KubepodsCgroup{"6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e", id}},
      // cgroupfs driver
      {"/kubepods/besteffort/pod74c13223-5a00-11e9-b385-42010a80018d/" + id,
       KubepodsCgroup{"74c13223-5a00-11e9-b385-42010a80018d", id}},
      {"/kubepods/pod74c13223-5a00-11e9-b385-42010a80018d/crio-" + id,
       KubepodsCgroup{"74c13223-5a00-11e9-b385-42010a80018d", id}},
      // the pod's own cgroup, CRI-O's conmon: the pod, no container
      {"/kubepods/burstable/pod74c13223-5a00-11e9-b385-42010a80018d",
       KubepodsCgroup{"74c13223-5a00-11e9-b385-42010a80018d", ""}},
      {"/kubepods.slice/kubepods-pod2c0d4e6f8a1b3c5d7e9f0a2b4c6d8e0f.slice/crio-conmon-" + id +
           ".scope",
       KubepodsCgroup{"2c0d4e6f8a1b3c5d7e9f0a2b4c6d8e0f", ""}},
      // kind (a kubelet in a slice), seen from inside a cgroup namespace
      {"/../../kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
       "kubelet-kubepods-besteffort-pod6b3c0d4e_8f2a_4c1b_9d7e_2a5f1c3b4d6e.slice/"
       "cri-containerd-" +
           id + ".scope",
       KubepodsCgroup{"6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e", id}},
      // a container's own sub-cgroup: still that container
      {"/kubepods/pod74c13223-5a00-11e9-b385-42010a80018d/" + id + "/init",
       KubepodsCgroup{"74c13223-5a00-11e9-b385-42010a80018d", id}},
      // not pods
      {"/system.slice/containerd.service", std::nullopt},
      {"/system.slice/docker-" + id + ".scope", std::nullopt},
      {"/user.slice/pod74c13223-5a00-11e9-b385-42010a80018d", std::nullopt},
      {"/kubepods/burstable", std::nullopt},
      {"/kubepods/pod1", std::nullopt},
      {"/", std::nullopt},
      {"", std::nullopt},
  };
  for (const Case& c : cases) {
    INFO(c.path);
    CHECK(ParseKubepodsCgroupPath(c.path) == c.want);
  }
}

TEST_CASE("the kubelet's log names give namespace, pod and container; others are refused",
          "[kubernetes]") {
  auto dir = ParsePodLogDirectoryName(
      "payments_gateway-7d9f8b6c5-x2k4q_6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e");
  REQUIRE(dir);
  CHECK(dir->namespace_name == "payments");
  CHECK(dir->pod == "gateway-7d9f8b6c5-x2k4q");
  CHECK(dir->uid == "6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e");
  CHECK_FALSE(ParsePodLogDirectoryName("payments_gateway"));
  CHECK_FALSE(ParsePodLogDirectoryName("a_b_c_6b3c0d4e-8f2a"));
  CHECK_FALSE(ParsePodLogDirectoryName("payments_gateway_NOT-A-UID"));

  auto log = ParseContainerLogName("gateway-7d9f8b6c5-x2k4q_payments_istio-proxy-" +
                                   std::string(kGatewayId) + ".log");
  REQUIRE(log);
  CHECK(log->pod == "gateway-7d9f8b6c5-x2k4q");
  CHECK(log->namespace_name == "payments");
  CHECK(log->container == "istio-proxy");  // a "-" in the container's name
  CHECK(log->container_id == kGatewayId);
  CHECK_FALSE(ParseContainerLogName("gateway_payments_gateway.log"));
  CHECK_FALSE(ParseContainerLogName("gateway_payments_gateway-" + std::string(kGatewayId)));
  CHECK_FALSE(ParseContainerLogName("_payments_gateway-" + std::string(kGatewayId) + ".log"));
}

TEST_CASE("a fixture node: processes resolve to their pod through /proc/PID/cgroup and the logs",
          "[kubernetes]") {
  PodAttribution pods(PodKey::kProcess, HostPaths(kNode / "proc", kNode / "sys"), {},
                      PodDirectory(kNode / "var/log/pods", kNode / "var/log/containers"));
  // containerd, systemd driver, cgroup v2
  CHECK(pods.OfProcess(101) == PodLabels{"payments", "gateway-7d9f8b6c5-x2k4q", "gateway"});
  // cgroupfs driver, cgroup v1: the same comm in another team's pod
  CHECK(pods.OfProcess(102) == PodLabels{"search", "gateway-5c4b3a2d1-p9q8r", "gateway"});
  // CRI-O's conmon: the pod, no container
  CHECK(pods.OfProcess(103) == PodLabels{"kube-system", "etcd-node-1", ""});
  // kind, read inside a cgroup namespace
  CHECK(pods.OfProcess(104) == PodLabels{"search", "gateway-5c4b3a2d1-p9q8r", "gateway"});
  // not a pod's; no such process
  CHECK(pods.OfProcess(105).empty());
  CHECK(pods.OfProcess(99999).empty());
  CHECK(pods.OfProcess(0).empty());
  // By process id as the BPF key holds it.
  CHECK(pods.Resolve(102).pod == "gateway-5c4b3a2d1-p9q8r");
}

// An empty kubelet log layout in a temporary directory, read by a PodDirectory whose clock the
// test moves (`now`); removed at the end.
struct LogTree {
  explicit LogTree(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "pods");
    std::filesystem::create_directories(dir / "containers");
  }
  ~LogTree() { std::filesystem::remove_all(dir); }
  const std::filesystem::path dir;
  std::chrono::steady_clock::time_point now{};
  PodDirectory directory{dir / "pods", dir / "containers", std::chrono::seconds(5),
                         [this] { return now; }};
};

TEST_CASE("a pod the logs do not name keeps its uid; a new pod is found on the next read",
          "[kubernetes]") {
  LogTree logs("kpt-pods");
  const std::filesystem::path& dir = logs.dir;
  auto& now = logs.now;
  PodDirectory& directory = logs.directory;
  const KubepodsCgroup cgroup{"0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b", std::string(kSearchId)};
  CHECK(directory.Lookup(cgroup) == PodLabels{"", "0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b", ""});

  std::filesystem::create_directories(
      dir / "pods" / "search_gateway-5c4b3a2d1-p9q8r_0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b");
  std::ofstream(dir / "containers" /
                ("gateway-5c4b3a2d1-p9q8r_search_gateway-" + std::string(kSearchId) + ".log"));
  now += std::chrono::seconds(1);  // too soon: not read again
  CHECK(directory.Lookup(cgroup).namespace_name.empty());
  now += std::chrono::seconds(5);
  CHECK(directory.Lookup(cgroup) == PodLabels{"search", "gateway-5c4b3a2d1-p9q8r", "gateway"});
  CHECK(directory.pods() == 1);
}

// What cgroup_churn's programs send of a cgroup's path: its last 127 bytes, the first component
// then cut (cgroup_churn.h, CGROUP_CHURN_TAIL_LEN).
std::pair<std::string, bool> Tail(const std::string& path) {
  constexpr size_t kTail = 127;
  if (path.size() <= kTail) return {path, false};
  return {path.substr(path.size() - kTail), true};
}

std::optional<KubepodsCgroup> OfTail(const std::string& path) {
  auto [tail, truncated] = Tail(path);
  return ParseKubepodsCgroupTail(tail, truncated);
}

TEST_CASE("a cgroup path's last 127 bytes still name its pod, or its container alone",
          "[kubernetes]") {
  const std::string gateway(kGatewayId), search(kSearchId);
  const std::string uid = "6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e";
  const std::string uid_ = "6b3c0d4e_8f2a_4c1b_9d7e_2a5f1c3b4d6e";
  // systemd driver, containerd: the scope and the pod slice are 151 bytes; the uid is cut, the
  // CRI scope names the container.
  const std::string scope = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                            uid_ + ".slice/cri-containerd-" + gateway + ".scope";
  REQUIRE(Tail(scope).second);
  CHECK(OfTail(scope) == KubepodsCgroup{"", gateway});
  // Below a test's or an agent's slice: the same.
  CHECK(OfTail("/kpt-pods-1.slice" + scope) == KubepodsCgroup{"", gateway});
  // CRI-O's shorter scope keeps the pod slice's "-pod<uid>.slice" whole.
  CHECK(OfTail("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid_ +
               ".slice/crio-" + gateway + ".scope") == KubepodsCgroup{uid, gateway});
  // The pod slice itself, and a cgroup a container made below its scope.
  CHECK(OfTail("/kpt-pods-1.slice/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
               uid_ + ".slice") == KubepodsCgroup{uid, ""});
  CHECK(OfTail(scope + "/worker") == KubepodsCgroup{"", gateway});
  // kind's nested kubelet (fixture 104), cgroupfs under a long prefix, CRI-O's conmon.
  CHECK(OfTail("/../../kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
               "kubelet-kubepods-besteffort-pod0e1f2a3b_4c5d_4e6f_8a7b_9c0d1e2f3a4b.slice/"
               "cri-containerd-" +
               search + ".scope") == KubepodsCgroup{"", search});
  CHECK(OfTail("/system.slice/containerd.service/kubepods/besteffort/"
               "pod0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b/" +
               search) == KubepodsCgroup{"0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b", search});
  CHECK(OfTail("/kubepods.slice/kubepods-pod2c0d4e6f8a1b3c5d7e9f0a2b4c6d8e0f.slice/crio-conmon-" +
               gateway + ".scope") == KubepodsCgroup{"2c0d4e6f8a1b3c5d7e9f0a2b4c6d8e0f", ""});
  // Not Kubernetes': Docker's own containers, a slice that only looks like a pod's, a cut name.
  CHECK_FALSE(OfTail("/system.slice/docker-" + gateway + ".scope"));
  CHECK_FALSE(
      OfTail("/system.slice/a-very-long-service-name-that-pushes-the-path-past-the-tail-"
             "length.service/docker-" +
             gateway + ".scope"));
  CHECK_FALSE(
      OfTail("/user.slice/user-1000.slice/user@1000.service/app.slice/"
             "some-application-with-a-long-name.slice/tool-pod12345678.slice/x.scope"));
  CHECK_FALSE(ParseKubepodsCgroupTail("ri-containerd-" + gateway + ".scope", true));
  CHECK_FALSE(ParseKubepodsCgroupTail("/system.slice/cron.service", false));
}

TEST_CASE("a container named only by its id resolves through /var/log/containers", "[kubernetes]") {
  PodAttribution pods(PodKey::kProcess, HostPaths(kNode / "proc", kNode / "sys"), {},
                      PodDirectory(kNode / "var/log/pods", kNode / "var/log/containers"));
  CHECK(pods.OfCgroup({"", std::string(kGatewayId)}) ==
        PodLabels{"payments", "gateway-7d9f8b6c5-x2k4q", "gateway"});
  CHECK(pods.OfCgroup({"", std::string(kSearchId)}) ==
        PodLabels{"search", "gateway-5c4b3a2d1-p9q8r", "gateway"});
  // An id no log names: nothing, not even a pod (no uid to show).
  CHECK(pods.OfCgroup({"", std::string(64, 'e')}).empty());
  CHECK(pods.OfCgroup({"6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e", ""}) ==
        PodLabels{"payments", "gateway-7d9f8b6c5-x2k4q", ""});
}

TEST_CASE("a pod not looked up before is found at once; one the logs lack is read for rarely",
          "[kubernetes]") {
  LogTree logs("kpt-fresh");
  const std::filesystem::path& dir = logs.dir;
  auto& now = logs.now;
  PodDirectory& directory = logs.directory;
  const std::string first = "0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b";
  const std::string second = "6b3c0d4e-8f2a-4c1b-9d7e-2a5f1c3b4d6e";
  CHECK(directory.Lookup({first, ""}).namespace_name.empty());  // read: not there
  std::filesystem::create_directories(dir / "pods" / ("search_a_" + first));
  std::filesystem::create_directories(dir / "pods" / ("payments_b_" + second));
  // A second later: the pod missed before waits for min_rescan, a new one is read for at once
  // (the churn probe sees a pod's cgroup once: there is no next interval to find it in).
  now += std::chrono::seconds(1);
  CHECK(directory.Lookup({second, ""}) == PodLabels{"payments", "b", ""});
  now += std::chrono::seconds(1);
  CHECK(directory.Lookup({first, ""}) == PodLabels{"search", "a", ""});  // that read found it
  // Within 100 ms of a read even a new pod waits.
  const std::string third = "11111111-2222-4333-8444-555555555555";
  CHECK(directory.Lookup({"22222222-2222-4333-8444-555555555555", ""}).namespace_name.empty());
  std::filesystem::create_directories(dir / "pods" / ("payments_c_" + third));
  now += std::chrono::milliseconds(50);
  CHECK(directory.Lookup({third, ""}).namespace_name.empty());
  now += std::chrono::milliseconds(100);
  CHECK(directory.Lookup({third, ""}) == PodLabels{"payments", "c", ""});
}

TEST_CASE("a pod whose logs were removed is still named until the read after next",
          "[kubernetes]") {
  LogTree logs("kpt-gone");
  auto& now = logs.now;
  PodDirectory& directory = logs.directory;
  const std::string uid = "0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b";
  const std::filesystem::path pod = logs.dir / "pods" / ("search_gateway-5c4b3a2d1-p9q8r_" + uid);
  std::filesystem::create_directories(pod);
  CHECK(directory.Lookup({uid, ""}).namespace_name == "search");
  std::filesystem::remove_all(pod);  // the kubelet's garbage collection
  const KubepodsCgroup unknown{"11111111-2222-4333-8444-555555555555", ""};
  now += std::chrono::seconds(5);
  CHECK(directory.Lookup(unknown).namespace_name.empty());  // a read: the pod is gone from it
  CHECK(directory.Lookup({uid, ""}).namespace_name == "search");
  now += std::chrono::seconds(5);
  CHECK(directory.Lookup(unknown).namespace_name.empty());  // the read after: forgotten
  CHECK(directory.Lookup({uid, ""}) == PodLabels{"", uid, ""});
}

TEST_CASE("pod labels: off when asked, off by default outside Kubernetes, on with pod logs",
          "[kubernetes]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kpt-k8s-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "proc/self");
  std::filesystem::create_directories(dir / "cgroup/unified/system.slice");
  std::filesystem::create_directories(dir / "cgroup/memory/system.slice");
  std::filesystem::create_directories(dir / "logs/pods");
  // A hybrid host: one v1 hierarchy and the unified one, as mountinfo lists them.
  std::ofstream(dir / "proc/self/mountinfo")
      << "30 25 0:26 / " << (dir / "cgroup/unified").string()
      << " rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
      << "35 25 0:31 / " << (dir / "cgroup/memory").string()
      << " rw,nosuid shared:15 - cgroup cgroup rw,memory\n";
  HostPaths paths(dir / "proc", dir / "sys");
  KubernetesConfig config;
  config.pod_logs = (dir / "logs/pods").string();
  config.container_logs = (dir / "logs/containers").string();
  std::string why;

  CHECK(MakePodAttribution(config, paths, &why) == nullptr);
  CHECK_THAT(why, Catch::Contains("no Kubernetes pods on this node"));

  config.pod_labels = KubernetesConfig::PodLabelsMode::kOff;
  std::filesystem::create_directories(dir / "cgroup/memory/kubepods/besteffort");
  CHECK(MakePodAttribution(config, paths, &why) == nullptr);
  CHECK(why == "kubernetes.pod_labels is off");

  // cgroupfs driver on v1: pods are in the v1 hierarchies only, so by process id.
  config.pod_labels = KubernetesConfig::PodLabelsMode::kAuto;
  auto pods = MakePodAttribution(config, paths, &why);
  REQUIRE(pods);
  CHECK(pods->key() == PodKey::kProcess);
  CHECK_THAT(why, Catch::Contains("by process id"));

  // systemd driver on a hybrid host: the unified hierarchy has the pods' scopes too.
  std::filesystem::create_directories(dir / "cgroup/unified/kubepods.slice");
  pods = MakePodAttribution(config, paths, &why);
  REQUIRE(pods);
  CHECK(pods->key() == PodKey::kCgroupId);
  CHECK_THAT(why, Catch::Contains("by cgroup v2 id"));

  config.attribute_by = KubernetesConfig::AttributeBy::kProcess;
  CHECK(MakePodAttribution(config, paths, &why)->key() == PodKey::kProcess);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kpath
