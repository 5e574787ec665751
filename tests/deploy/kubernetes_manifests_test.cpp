// deploy/kubernetes/: the manifests parse, fit together (selectors, ports, mounts), grant exactly
// the capabilities of the systemd unit, ship a configuration kpathd accepts, and carry the same
// rules as deploy/prometheus/kpathd-rules.yml.
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kDir = std::filesystem::path(KPATH_SOURCE_DIR) / "deploy/kubernetes";

YAML::Node Load(const std::string& file) { return YAML::LoadFile((kDir / file).string()); }

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Capability names of the unit's CapabilityBoundingSet, without CAP_.
std::set<std::string> UnitCapabilities() {
  std::istringstream unit(
      ReadFile(std::filesystem::path(KPATH_SOURCE_DIR) / "systemd/kpathd.service"));
  std::set<std::string> caps;
  for (std::string line; std::getline(unit, line);) {
    if (line.rfind("CapabilityBoundingSet=", 0) != 0) continue;
    std::istringstream words(line.substr(line.find('=') + 1));
    for (std::string w; words >> w;) caps.insert(w.rfind("CAP_", 0) == 0 ? w.substr(4) : w);
  }
  return caps;
}

YAML::Node Container(const YAML::Node& daemonset) {
  return daemonset["spec"]["template"]["spec"]["containers"][0];
}

}  // namespace

TEST_CASE("every manifest parses and the kustomization lists them all") {
  YAML::Node k = Load("kustomization.yaml");
  std::set<std::string> listed;
  for (const auto& r : k["resources"]) listed.insert(r.as<std::string>());
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kDir)) {
    if (e.path().extension() != ".yaml" || e.path().filename() == "kustomization.yaml") continue;
    files.insert(e.path().filename().string());
    YAML::Node doc = YAML::LoadFile(e.path().string());
    INFO(e.path());
    CHECK(doc["apiVersion"].IsDefined());
    CHECK(doc["kind"].IsDefined());
    CHECK(doc["metadata"]["name"].as<std::string>() == "kpathd");
  }
  CHECK(listed == files);
}

TEST_CASE(
    "the DaemonSet runs unprivileged with the unit's capabilities and the host views it needs") {
  YAML::Node ds = Load("daemonset.yaml");
  REQUIRE(ds["kind"].as<std::string>() == "DaemonSet");
  YAML::Node pod = ds["spec"]["template"]["spec"];
  CHECK(pod["hostPID"].as<bool>());
  YAML::Node sc = Container(ds)["securityContext"];
  CHECK_FALSE(sc["privileged"].as<bool>());
  CHECK_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  CHECK(sc["readOnlyRootFilesystem"].as<bool>());
  std::vector<std::string> drop = sc["capabilities"]["drop"].as<std::vector<std::string>>();
  CHECK(drop == std::vector<std::string>{"ALL"});
  std::vector<std::string> add = sc["capabilities"]["add"].as<std::vector<std::string>>();
  CHECK(std::set<std::string>(add.begin(), add.end()) == UnitCapabilities());

  std::map<std::string, std::string> mounts;  // mountPath -> volume
  for (const auto& m : Container(ds)["volumeMounts"])
    mounts[m["mountPath"].as<std::string>()] = m["name"].as<std::string>();
  std::map<std::string, std::string> host_paths;  // volume -> host path
  for (const auto& v : pod["volumes"])
    if (v["hostPath"])
      host_paths[v["name"].as<std::string>()] = v["hostPath"]["path"].as<std::string>();
  for (std::string path : {"/sys/fs/cgroup", "/sys/kernel/tracing", "/sys/kernel/debug"}) {
    INFO(path);
    REQUIRE(mounts.count(path));
    CHECK(host_paths[mounts[path]] == path);
  }
  REQUIRE(mounts.count("/etc/kpathd"));
}

TEST_CASE(
    "the DaemonSet's configuration is valid and matches its port, Service and ServiceMonitor") {
  YAML::Node ds = Load("daemonset.yaml");
  YAML::Node cm = Load("configmap.yaml");
  std::string config = cm["data"]["kpathd.yaml"].as<std::string>();
  // kpathd itself validates it.
  std::filesystem::path tmp = std::filesystem::temp_directory_path() / "kpath-k8s-config.yaml";
  { std::ofstream(tmp) << config; }
  int status = std::system(
      (std::string(KPATHD_BINARY) + " --check-config " + tmp.string() + " >/dev/null").c_str());
  std::filesystem::remove(tmp);
  CHECK(status == 0);
  // The container is started with that file, mounted from that ConfigMap.
  std::vector<std::string> args = Container(ds)["args"].as<std::vector<std::string>>();
  CHECK(args == std::vector<std::string>{"--config", "/etc/kpathd/kpathd.yaml"});
  // Port: the configuration's, the container's, the scrape annotation's.
  YAML::Node parsed = YAML::Load(config);
  std::string listen = parsed["listen_address"].as<std::string>();
  int port = std::stoi(listen.substr(listen.rfind(':') + 1));
  CHECK(Container(ds)["ports"][0]["containerPort"].as<int>() == port);
  // Service -> pods, ServiceMonitor -> Service, by labels and port name.
  YAML::Node svc = Load("service.yaml");
  YAML::Node sm = Load("servicemonitor.yaml");
  auto pod_labels =
      ds["spec"]["template"]["metadata"]["labels"].as<std::map<std::string, std::string>>();
  for (const auto& [k, v] : svc["spec"]["selector"].as<std::map<std::string, std::string>>()) {
    CHECK(pod_labels[k] == v);
  }
  auto svc_labels = svc["metadata"]["labels"].as<std::map<std::string, std::string>>();
  for (const auto& [k, v] :
       sm["spec"]["selector"]["matchLabels"].as<std::map<std::string, std::string>>()) {
    CHECK(svc_labels[k] == v);
  }
  CHECK(sm["spec"]["endpoints"][0]["port"].as<std::string>() ==
        svc["spec"]["ports"][0]["name"].as<std::string>());
  CHECK(svc["spec"]["ports"][0]["port"].as<int>() == port);
  // The KpathdDown alert looks for job="kpathd": the ServiceMonitor's job is the Service's name.
  CHECK(svc["metadata"]["name"].as<std::string>() == "kpathd");
  CHECK(sm["spec"]["sampleLimit"].as<int>() > 0);
}

TEST_CASE("the PrometheusRule holds exactly the rules of deploy/prometheus/kpathd-rules.yml") {
  YAML::Node rule = Load("prometheusrule.yaml");
  CHECK(rule["kind"].as<std::string>() == "PrometheusRule");
  YAML::Node rules =
      YAML::LoadFile(std::string(KPATH_SOURCE_DIR) + "/deploy/prometheus/kpathd-rules.yml");
  // Structural equality, through the canonical emitter.
  YAML::Emitter a, b;
  a << rule["spec"]["groups"];
  b << rules["groups"];
  CHECK(std::string(a.c_str()) == std::string(b.c_str()));
  CHECK(rules["groups"].size() >= 6);
}

TEST_CASE("one scrape path: the ServiceMonitor, and no scrape annotations beside it") {
  YAML::Node ds = Load("daemonset.yaml");
  YAML::Node svc = Load("service.yaml");
  std::set<std::string> listed;
  for (const auto& r : Load("kustomization.yaml")["resources"]) listed.insert(r.as<std::string>());
  REQUIRE(listed.count("servicemonitor.yaml") == 1);
  // A Prometheus that discovers pods or endpoints by annotation as well would scrape twice.
  for (const YAML::Node& meta : {ds["spec"]["template"]["metadata"], svc["metadata"]}) {
    if (!meta["annotations"]) continue;
    for (const auto& a : meta["annotations"]) {
      INFO(a.first.as<std::string>());
      CHECK(a.first.as<std::string>().rfind("prometheus.io/", 0) != 0);
    }
  }
}

TEST_CASE("the ServiceMonitor and PrometheusRule carry the release label Prometheus selects by") {
  // kube-prometheus-stack's serviceMonitorSelector and ruleSelector: release: <Helm release>.
  // A comment saying so (what was shipped) selects nothing.
  YAML::Node sm = Load("servicemonitor.yaml")["metadata"]["labels"];
  YAML::Node rule = Load("prometheusrule.yaml")["metadata"]["labels"];
  REQUIRE(sm["release"]);
  REQUIRE(rule["release"]);
  CHECK(sm["release"].as<std::string>() == "kube-prometheus-stack");
  CHECK(rule["release"].as<std::string>() == sm["release"].as<std::string>());
}

TEST_CASE("liveness and readiness probe /-/healthy and /-/ready as the ConfigMap serves them") {
  YAML::Node c = Container(Load("daemonset.yaml"));
  YAML::Node config = YAML::Load(Load("configmap.yaml")["data"]["kpathd.yaml"].as<std::string>());
  // Without web.config_file kpathd serves plain HTTP without credentials; with one, TLS at least
  // (tls_server_config is what a web configuration file is mostly for): HTTPS probes.
  const bool web_config = config["web"] && config["web"]["config_file"];
  const std::string scheme = web_config ? "HTTPS" : "HTTP";
  for (const auto& [probe, path] : std::map<std::string, std::string>{
           {"livenessProbe", "/-/healthy"}, {"readinessProbe", "/-/ready"}}) {
    INFO(probe);
    YAML::Node get = c[probe]["httpGet"];
    REQUIRE(get);
    CHECK(get["path"].as<std::string>() == path);
    CHECK(get["port"].as<std::string>() == c["ports"][0]["name"].as<std::string>());
    CHECK(get["scheme"].as<std::string>() == scheme);
    // An Authorization header only with a web configuration that could ask for it.
    if (!web_config) CHECK_FALSE(get["httpHeaders"]);
  }
}

TEST_CASE("resources: CPU and memory requested, memory limited, CPU not throttled") {
  YAML::Node r = Container(Load("daemonset.yaml"))["resources"];
  auto mebibytes = [](const YAML::Node& n) {
    std::string v = n.as<std::string>();
    REQUIRE(v.size() > 2);
    REQUIRE(v.substr(v.size() - 2) == "Mi");
    return std::stoi(v.substr(0, v.size() - 2));
  };
  REQUIRE(r["requests"]["cpu"]);
  // bench/pod_resources.py: peak RSS about 35 MiB under the seed workloads (deploy/README.md).
  CHECK(mebibytes(r["requests"]["memory"]) >= 48);
  CHECK(mebibytes(r["limits"]["memory"]) >= 4 * mebibytes(r["requests"]["memory"]));
  CHECK_FALSE(r["limits"]["cpu"]);
}
