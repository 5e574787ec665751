// End to end, with the real programs on loopback: kpathd on the real kernel, Prometheus (Debian's
// package) scraping it every second with the shipped rules, Alertmanager with the shipped route
// example delivering to a webhook of this test. Checks that every shipped rule evaluates without
// error, that every query of the shipped dashboard parses and returns, and that a real workload
// (a process churning cgroups of one unit) makes KpathCgroupChurnHigh arrive at the webhook
// through the example's routes. Test-sized thresholds: the alerts are loaded a second time with
// `for: 0s` (the shipped durations are tens of minutes); expressions and thresholds are unchanged.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "support/cgroup_churn.h"
#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = KPATH_SOURCE_DIR;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// A server program of the test (Prometheus, Alertmanager): started with its output in a log,
// SIGTERMed and reaped at the end, SIGKILLed if it lingers.
class ServerProcess {
 public:
  ServerProcess(std::vector<std::string> argv, fs::path log) : log_(std::move(log)) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
  }
  ~ServerProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(50ms);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  bool Running() { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  std::string Log() const { return ReadFile(log_); }

 private:
  pid_t pid_ = -1;
  fs::path log_;
};

// The test's Alertmanager webhook: a tiny HTTP server that keeps every POSTed body.
class Webhook {
 public:
  Webhook() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    REQUIRE(listen(fd_, 16) == 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Webhook() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  std::vector<std::string> Bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string req;
      char buf[8192];
      size_t want = std::string::npos;
      auto deadline = std::chrono::steady_clock::now() + 5s;
      while (std::chrono::steady_clock::now() < deadline) {
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 200) <= 0) continue;
        ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
        size_t end = req.find("\r\n\r\n");
        if (end != std::string::npos && want == std::string::npos) {
          std::smatch m;
          std::string head = req.substr(0, end);
          static const std::regex kLength("[Cc]ontent-[Ll]ength: *([0-9]+)");
          want = end + 4 + (std::regex_search(head, m, kLength) ? std::stoul(m[1]) : 0);
        }
        if (want != std::string::npos && req.size() >= want) break;
      }
      const char kOk[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      send(c, kOk, sizeof(kOk) - 1, MSG_NOSIGNAL);
      close(c);
      size_t end = req.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::lock_guard<std::mutex> lock(mu_);
        bodies_.push_back(req.substr(end + 4));
      }
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
};

// GET a Prometheus-style JSON API path; the parsed body (JSON is YAML), or a null node.
YAML::Node GetJson(int port, const std::string& path) {
  auto r = HttpGet(port, path, 10s);
  if (!r) return YAML::Node();
  try {
    YAML::Node n = YAML::Load(r->body);
    if (r->status != 200 && n.IsMap()) n["http_status"] = r->status;
    return n;
  } catch (const YAML::Exception& e) {
    UNSCOPED_INFO("unparsable JSON from " << path << ": " << e.what() << "\n"
                                          << r->body.substr(0, 500));
    return YAML::Node();
  }
}

bool WaitFor(std::chrono::seconds timeout, const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(250ms);
  }
  return done();
}

// The alerting rules of the shipped file with `for: 0s`, in groups of their own; recording rules
// are left out (the shipped file, loaded as well, records them).
std::string TestSizedAlerts() {
  YAML::Node shipped = YAML::LoadFile((kSource / "deploy/prometheus/kpathd-rules.yml").string());
  YAML::Node groups(YAML::NodeType::Sequence);
  for (const auto& g : shipped["groups"]) {
    YAML::Node group;
    group["name"] = g["name"].as<std::string>() + ".e2e";
    YAML::Node rules(YAML::NodeType::Sequence);
    for (const auto& r : g["rules"]) {
      if (!r["alert"]) continue;
      YAML::Node copy = YAML::Clone(r);
      copy["for"] = "0s";
      copy["labels"]["rules"] = "test-sized";
      rules.push_back(copy);
    }
    if (rules.size() == 0) continue;
    group["rules"] = rules;
    groups.push_back(group);
  }
  YAML::Node out;
  out["groups"] = groups;
  YAML::Emitter e;
  e << out;
  return e.c_str();
}

// The shipped Alertmanager example with every receiver pointed at `url` and test-sized waits.
std::string TestAlertmanagerConfig(const std::string& url) {
  YAML::Node am = YAML::LoadFile((kSource / "deploy/alertmanager/alertmanager.yml").string());
  am["route"]["group_wait"] = "1s";
  am["route"]["group_interval"] = "1s";
  for (auto r : am["receivers"])
    if (r["webhook_configs"])
      for (auto w : r["webhook_configs"]) w["url"] = url;
  YAML::Emitter e;
  e << am;
  return e.c_str();
}

// Every `expr` of the dashboard (panels, rows, annotations), with Grafana's variables replaced.
std::vector<std::string> DashboardQueries(const std::string& node) {
  YAML::Node d = YAML::LoadFile((kSource / "deploy/grafana/kpathd-dashboard.json").string());
  std::vector<std::string> out;
  std::function<void(const YAML::Node&)> walk = [&](const YAML::Node& n) {
    if (n.IsMap()) {
      for (const auto& kv : n) {
        if (kv.first.as<std::string>() == "expr" && kv.second.IsScalar()) {
          out.push_back(kv.second.as<std::string>());
        } else {
          walk(kv.second);
        }
      }
    } else if (n.IsSequence()) {
      for (const auto& c : n) walk(c);
    }
  };
  walk(d["panels"]);
  walk(d["annotations"]);
  for (std::string& q : out) {
    for (auto [var, value] :
         std::vector<std::pair<std::string, std::string>>{{"$__rate_interval", "1m"},
                                                          {"$__range", "5m"},
                                                          {"$__interval", "15s"},
                                                          {"$node", node}}) {
      for (size_t pos; (pos = q.find(var)) != std::string::npos;) q.replace(pos, var.size(), value);
    }
  }
  return out;
}

// A fresh directory under /tmp for the servers' configuration and data, removed at the end.
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/kpath-e2e-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path path;
};

// A process named `comm` that creates and removes `dir` (one cgroup, one unit) about 100 times a
// second until killed.
pid_t ChurnForever(const std::string& comm, const std::string& dir) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_NAME, comm.c_str());
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (;;) {
    if (mkdir(dir.c_str(), 0755) == 0) rmdir(dir.c_str());
    usleep(10000);
  }
}

}  // namespace

TEST_CASE(
    "Prometheus evaluates every shipped rule and dashboard query, and Alertmanager "
    "delivers KpathCgroupChurnHigh for a churning unit to a webhook") {
  if (!IsRoot()) {
    WARN("not root: kpathd's BPF probes cannot attach; skipped");
    return;
  }
  std::optional<std::string> cgroot = MemoryCgroupRoot();
  REQUIRE(cgroot.has_value());
  const TempDir dir;
  const fs::path& tmp = dir.path;

  // kpathd, sampling every second.
  KpathdProcess kpathd(KpathdOptions{.config_yaml = "sampling_interval: 1s\n"});
  REQUIRE(kpathd.WaitUntilServing());
  const std::string target = "127.0.0.1:" + std::to_string(kpathd.port());

  // Alertmanager with the shipped routes, delivering to our webhook.
  Webhook hook;
  const int am_port = FreePort();
  WriteFile(tmp / "alertmanager.yml",
            TestAlertmanagerConfig("http://127.0.0.1:" + std::to_string(hook.port()) + "/alerts"));
  fs::create_directories(tmp / "am");
  ServerProcess am(
      {"prometheus-alertmanager", "--config.file=" + (tmp / "alertmanager.yml").string(),
       "--storage.path=" + (tmp / "am").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(am_port),
       "--cluster.listen-address=", "--log.level=warn"},
      tmp / "alertmanager.log");

  // Prometheus: the shipped rules as they are, plus the test-sized alerts.
  fs::copy_file(kSource / "deploy/prometheus/kpathd-rules.yml", tmp / "kpathd-rules.yml");
  WriteFile(tmp / "kpathd-alerts-test-sized.yml", TestSizedAlerts());
  const int prom_port = FreePort();
  WriteFile(tmp / "prometheus.yml",
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files: [kpathd-rules.yml, kpathd-alerts-test-sized.yml]\n"
            "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:" +
                std::to_string(am_port) +
                "']\n"
                "scrape_configs:\n  - job_name: kpathd\n    sample_limit: 5000\n"
                "    static_configs:\n      - targets: ['" +
                target + "']\n");
  ServerProcess prom(
      {"prometheus", "--config.file=" + (tmp / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (tmp / "data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"},
      tmp / "prometheus.log");

  INFO("prometheus log:\n" << prom.Log() << "\nalertmanager log:\n" << am.Log());
  REQUIRE(WaitFor(30s, [&] {
    auto r = HttpGet(prom_port, "/-/ready", 2s);
    return r && r->status == 200;
  }));
  REQUIRE(WaitFor(30s, [&] {
    auto r = HttpGet(am_port, "/-/ready", 2s);
    return r && r->status == 200;
  }));
  // kpathd is scraped.
  REQUIRE(WaitFor(30s, [&] {
    YAML::Node r =
        GetJson(prom_port, "/api/v1/query?query=" + UrlEncode("up{job=\"kpathd\"} == 1"));
    return r && r["data"]["result"].size() == 1;
  }));

  // A unit churning cgroups: kpath-e2e-churn.service under a process named kpath-e2e.
  const std::string slice = *cgroot + "/kpath-e2e.slice";
  mkdir(slice.c_str(), 0755);
  const std::string unit_dir = slice + "/kpath-e2e-churn.service";
  pid_t churner = ChurnForever("kpath-e2e", unit_dir);
  struct StopChurn {
    pid_t pid;
    std::string unit_dir, slice;
    ~StopChurn() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      rmdir(unit_dir.c_str());
      rmdir(slice.c_str());
    }
  } stop_churn{churner, unit_dir, slice};

  SECTION("every shipped rule evaluates without error") {
    const size_t shipped_rules = [] {
      size_t n = 0;
      for (const auto& g :
           YAML::LoadFile((kSource / "deploy/prometheus/kpathd-rules.yml").string())["groups"])
        n += g["rules"].size();
      return n;
    }();
    YAML::Node groups;
    // Until every rule has been evaluated at least once.
    bool evaluated = WaitFor(30s, [&] {
      YAML::Node r = GetJson(prom_port, "/api/v1/rules");
      if (!r || r["status"].as<std::string>() != "success") return false;
      groups = r["data"]["groups"];
      for (const auto& g : groups)
        for (const auto& rule : g["rules"])
          if (rule["health"].as<std::string>() == "unknown") return false;
      return groups.size() > 0;
    });
    REQUIRE(evaluated);
    size_t ok = 0, from_shipped_file = 0;
    for (const auto& g : groups) {
      bool shipped = g["file"].as<std::string>().ends_with("/kpathd-rules.yml");
      for (const auto& rule : g["rules"]) {
        INFO("rule " << rule["name"].as<std::string>() << " in group "
                     << g["name"].as<std::string>() << ": "
                     << (rule["lastError"] ? rule["lastError"].as<std::string>() : ""));
        CHECK(rule["health"].as<std::string>() == "ok");
        ok += rule["health"].as<std::string>() == "ok";
        from_shipped_file += shipped;
      }
    }
    CHECK(from_shipped_file == shipped_rules);
    WARN(ok << " rules evaluated without error (" << shipped_rules << " shipped, and their "
            << "test-sized alerts)");
  }

  SECTION("every dashboard query parses and returns") {
    std::vector<std::string> queries = DashboardQueries(target);
    REQUIRE(queries.size() >= 30);
    // Let a few scrapes land so that rate() has samples.
    std::this_thread::sleep_for(3s);
    size_t with_data = 0;
    for (const std::string& q : queries) {
      YAML::Node r = GetJson(prom_port, "/api/v1/query?query=" + UrlEncode(q));
      INFO("query: " << q);
      REQUIRE(r);
      CHECK(r["status"].as<std::string>() == "success");
      with_data += r["data"]["result"].IsSequence() && r["data"]["result"].size() > 0;
    }
    // The node selector's values: label_values(kpath_build_info, instance).
    YAML::Node values = GetJson(
        prom_port, "/api/v1/label/instance/values?" + UrlEncode("match[]") + "=kpath_build_info");
    REQUIRE(values);
    CHECK(values["data"].size() == 1);
    CHECK(values["data"][0].as<std::string>() == target);
    WARN(queries.size() << " dashboard queries parse and return, " << with_data
                        << " with data on this host");
  }

  SECTION("KpathCgroupChurnHigh reaches the webhook through the example's routes") {
    YAML::Node found;
    bool delivered = WaitFor(90s, [&] {
      for (const std::string& body : hook.Bodies()) {
        YAML::Node n;
        try {
          n = YAML::Load(body);
        } catch (const YAML::Exception&) {
          continue;
        }
        for (const YAML::Node& a : n["alerts"]) {
          const YAML::Node l = a["labels"];
          if (l["alertname"].as<std::string>("") == "KpathCgroupChurnHigh" &&
              l["unit"].as<std::string>("") == "kpath-e2e-churn.service") {
            found = n;
            found["the_alert"] = YAML::Node(a);
            return true;
          }
        }
      }
      return false;
    });
    INFO("webhook received " << hook.Bodies().size() << " notifications");
    REQUIRE(delivered);
    const YAML::Node& alert = found["the_alert"];
    CHECK(alert["status"].as<std::string>() == "firing");
    CHECK(alert["labels"]["comm"].as<std::string>() == "kpath-e2e");
    CHECK(alert["labels"]["severity"].as<std::string>() == "warning");
    CHECK(alert["labels"]["instance"].as<std::string>() == target);
    // Warnings go to the ticket queue in the example's routes.
    CHECK(found["receiver"].as<std::string>() == "tickets");
    CHECK_THAT(alert["annotations"]["summary"].as<std::string>(),
               Catch::Contains("kpath-e2e creates") && Catch::Contains("kpath-e2e-churn.service"));
    CHECK_THAT(alert["annotations"]["runbook_url"].as<std::string>(),
               Catch::EndsWith("/docs/runbooks/KpathCgroupChurnHigh.md"));
  }
}

// The example's inhibitions with a real Alertmanager (no kpathd, no root): alerts are added with
// amtool as Prometheus would send them, then Alertmanager's API says which it holds back. One
// cause, one notification (issue 19 item 6): KpathPercpuFillingMemory's 24 h warning under its
// 4 h critical, and KpathdCollectorFailing under KpathdProbeDetached for the same probe. Issue 22:
// KpathForeignHookRollout has no instance; one hook's page holds back that hook's ticket only.
TEST_CASE("Alertmanager's example routes notify one alert per cause") {
  const TempDir dir;
  const fs::path& tmp = dir.path;
  Webhook hook;
  const int am_port = FreePort();
  WriteFile(tmp / "alertmanager.yml",
            TestAlertmanagerConfig("http://127.0.0.1:" + std::to_string(hook.port()) + "/alerts"));
  ServerProcess am(
      {"prometheus-alertmanager", "--config.file=" + (tmp / "alertmanager.yml").string(),
       "--storage.path=" + tmp.string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(am_port),
       "--cluster.listen-address=", "--log.level=warn"},
      tmp / "alertmanager.log");
  INFO("alertmanager log:\n" << am.Log());
  REQUIRE(WaitFor(30s, [&] {
    auto r = HttpGet(am_port, "/-/ready", 2s);
    return r && r->status == 200;
  }));
  const std::string url = "http://127.0.0.1:" + std::to_string(am_port);
  auto add = [&](const std::string& labels) {
    const std::string cmd =
        "amtool alert add --alertmanager.url=" + url + " " + labels + " job=kpathd >/dev/null 2>&1";
    INFO(cmd);
    REQUIRE(std::system(cmd.c_str()) == 0);
  };
  add("alertname=KpathPercpuFillingMemory severity=critical instance=n1");
  add("alertname=KpathPercpuFillingMemory severity=warning instance=n1");
  add("alertname=KpathPercpuFillingMemory severity=warning instance=n2");  // no critical there
  add("alertname=KpathdProbeDetached severity=warning instance=n1 probe=irqoff mechanism=none");
  add("alertname=KpathdCollectorFailing severity=warning instance=n1 collector=irqoff "
      "probe=irqoff");
  add("alertname=KpathdCollectorFailing severity=warning instance=n1 collector=slab probe=slab");
  // The same hook hot on some nodes' hot-function lists and not on others': both tiers fire.
  add("alertname=KpathForeignHookRollout severity=critical kind=kprobe target=vfs_read "
      "owner=agent hot=true");
  add("alertname=KpathForeignHookRollout severity=warning kind=kprobe target=vfs_read "
      "owner=agent hot=false");
  add("alertname=KpathForeignHookRollout severity=warning kind=raw_tracepoint "
      "target=sched:sched_process_exec owner=tetragon hot=false");

  // alertname/severity/instance/collector/target of every alert Alertmanager holds back, and of
  // all.
  auto alerts = [&](bool only_inhibited) {
    std::set<std::string> out;
    YAML::Node r = GetJson(am_port, "/api/v2/alerts");
    if (!r || !r.IsSequence()) return out;
    for (const YAML::Node& a : r) {
      const bool inhibited = a["status"]["inhibitedBy"].size() > 0;
      if (only_inhibited && !inhibited) continue;
      const YAML::Node l = a["labels"];
      out.insert(l["alertname"].as<std::string>() + "/" + l["severity"].as<std::string>() + "/" +
                 l["instance"].as<std::string>("") + "/" + l["collector"].as<std::string>("") +
                 "/" + l["target"].as<std::string>(""));
    }
    return out;
  };
  REQUIRE(WaitFor(30s, [&] { return alerts(false).size() == 9; }));
  std::set<std::string> inhibited;
  // Inhibitions are computed as the alerts arrive; give the last one a moment.
  WaitFor(10s, [&] {
    inhibited = alerts(true);
    return inhibited.size() >= 3;
  });
  CHECK(inhibited == std::set<std::string>{"KpathPercpuFillingMemory/warning/n1//",
                                           "KpathdCollectorFailing/warning/n1/irqoff/",
                                           "KpathForeignHookRollout/warning///vfs_read"});
}
