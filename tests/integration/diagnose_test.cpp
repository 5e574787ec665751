// `kpathd diagnose` on the real kernel: while a process named kpath-diag churns memory cgroups of
// the unit kpath-diag.service (each charged a page of shm, so that it stays dying: seed 000),
// diagnose must report the pathology, name the unit, the process and mem_cgroup_css_alloc, give
// the runbook's fixes, and exit 1. Text and --json runs watch the same churn side by side.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "support/cgroup_churn.h"
#include "support/kpathd_process.h"

using namespace std::chrono_literals;
using namespace kpath::testing;

namespace {

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// kpathd diagnose ARGS..., stdout and stderr to files; Wait() gives the exit status.
class Diagnose {
 public:
  Diagnose(const std::string& dir, const std::string& name, std::vector<std::string> args)
      : out_(dir + "/" + name + ".out"), err_(dir + "/" + name + ".err") {
    pid_ = fork();
    if (pid_ == 0) {
      int o = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(o, 1);
      dup2(e, 2);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<std::string> argv{KpathdBinary(), "diagnose"};
      argv.insert(argv.end(), args.begin(), args.end());
      std::vector<char*> c;
      for (auto& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      execv(c[0], c.data());
      _exit(127);
    }
  }
  ~Diagnose() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void Signal(int sig) { kill(pid_, sig); }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string Out() const { return ReadFile(out_); }
  std::string Err() const { return ReadFile(err_); }

 private:
  pid_t pid_ = -1;
  std::string out_, err_;
};

}  // namespace

TEST_CASE("diagnose names the churning unit, its process and mem_cgroup_css_alloc (seed 000)") {
  if (!IsRoot()) {
    WARN("not root: diagnose's BPF probes cannot attach; skipped");
    return;
  }
  std::optional<std::string> root = MemoryCgroupRoot();
  REQUIRE(root.has_value());
  const std::string parent = *root + "/kpath-diag-test";
  mkdir(parent.c_str(), 0755);
  if (std::filesystem::exists(*root + "/cgroup.subtree_control")) {
    WriteFile(*root + "/cgroup.subtree_control", "+memory");
    WriteFile(parent + "/cgroup.subtree_control", "+memory");
  }
  char tmpl[] = "/tmp/kpath-diag-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string shm_prefix = "/dev/shm/kpath-diag-" + std::to_string(getpid()) + "-";

  // Two diagnoses watching the same churn: one for people, one for scripts. The churn starts
  // when both say they are watching and they are stopped (Ctrl-C) when it is done, so both see
  // all of it however slowly a busy host attaches probes and runs the churn; --duration is only
  // the deadline.
  const std::vector<std::string> watch{"--duration", "10m", "--log-level", "info"};
  Diagnose text(dir, "text", watch);
  std::vector<std::string> json_args = watch;
  json_args.push_back("--json");
  Diagnose json(dir, "json", json_args);
  constexpr const char* kWatching = "diagnose: watching for";
  bool watching = false;
  for (auto deadline = std::chrono::steady_clock::now() + 120s;
       !watching && std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(100ms)) {
    watching = text.Err().find(kWatching) != std::string::npos &&
               json.Err().find(kWatching) != std::string::npos;
  }
  INFO("stderr of the text run:\n" << text.Err() << "\nof the json run:\n" << json.Err());
  CHECK(watching);

  // The seed-000 workload: kCgroups memory cgroups at about 50 a second, each left dying.
  constexpr int kCgroups = 250;
  pid_t churner = watching ? fork() : -1;
  if (churner == 0) {
    prctl(PR_SET_NAME, "kpath-diag");
    std::string self = std::to_string(getpid());
    std::string cg = parent + "/kpath-diag.service";
    int made = 0;
    for (int i = 0; i < kCgroups; ++i) {
      if (mkdir(cg.c_str(), 0755) == 0) {
        ++made;
        WriteFile(cg + "/cgroup.procs", self);
        WriteFile(shm_prefix + std::to_string(i), std::string(4096, 'x'));
        // Out again, to the hierarchy's root: under cgroup v2 the parent, which delegates the
        // memory controller to its children, may hold no process ("no internal processes").
        WriteFile(*root + "/cgroup.procs", self);
        rmdir(cg.c_str());
      }
      usleep(20000);
    }
    _exit(made == kCgroups ? 0 : 1);
  }
  int churn_status = 0;
  if (churner > 0) waitpid(churner, &churn_status, 0);
  text.Signal(SIGINT);
  json.Signal(SIGINT);

  int text_exit = text.Wait();
  int json_exit = json.Wait();
  // Leave nothing behind: shm pages (their memcgs then go), the test's cgroups, the outputs.
  for (int i = 0; i < kCgroups; ++i) unlink((shm_prefix + std::to_string(i)).c_str());
  rmdir((parent + "/kpath-diag.service").c_str());
  rmdir(parent.c_str());
  std::string report = text.Out(), report_json = json.Out(), err = text.Err();
  std::filesystem::remove_all(dir);

  INFO("text report:\n" << report << "\nstderr:\n" << err << "\njson:\n" << report_json);
  CHECK((WIFEXITED(churn_status) && WEXITSTATUS(churn_status) == 0));  // every mkdir succeeded
  CHECK(text_exit == 1);
  CHECK(json_exit == 1);

  // For people: the finding, with unit, process, kernel function and the runbook's fixes.
  std::istringstream lines(report);
  std::string finding;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("FOUND  Percpu memory growth and cgroup churn", 0) == 0) finding = line;
  CHECK_THAT(finding, Catch::Contains("unit kpath-diag.service") &&
                          Catch::Contains("created by kpath-diag") &&
                          Catch::Contains("mem_cgroup_css_alloc"));
  CHECK_THAT(report, Catch::Contains("cgroups created for unit kpath-diag.service by process "
                                     "kpath-diag"));
  CHECK_THAT(report, Catch::Contains("per-CPU memory allocated by process kpath-diag in kernel "
                                     "function mem_cgroup_css_alloc"));
  CHECK_THAT(report, Catch::Contains("systemctl edit kpath-diag.service"));
  CHECK_THAT(report, Catch::Contains("CPUAccounting=no"));
  CHECK_THAT(report, Catch::Contains("long-running service"));
  CHECK_THAT(report, Catch::Contains("runbooks: KpathCgroupChurnHigh"));
  // Not a terminal: no progress line.
  CHECK(err.find('\r') == std::string::npos);

  // For scripts: the same, structured (one line of JSON).
  CHECK_THAT(report_json, Catch::StartsWith("{\"found\":true,"));
  std::smatch m;
  CHECK(std::regex_search(
      report_json,
      std::regex(
          R"("id":"percpu_cgroup_churn","title":"[^"]*","seeds":"seed 000","state":"found")")));
  REQUIRE(std::regex_search(
      report_json, m,
      std::regex(
          R"(\{"labels":\{"comm":"kpath-diag","unit":"kpath-diag.service"\},"value":([0-9.e+]+),"unit":"cgroups created"\})")));
  // Every cgroup of the churn, none missed and none counted twice.
  CHECK(std::stod(m[1]) == kCgroups);
  CHECK(std::regex_search(
      report_json,
      std::regex(
          R"(\{"labels":\{"caller":"mem_cgroup_css_alloc","comm":"kpath-diag"\},"value":[0-9.e+]+,"unit":"bytes allocated"\})")));
}

TEST_CASE("diagnose refuses a bad duration with exit status 2") {
  CommandResult r = RunCommand(KpathdBinary() + " diagnose --duration 0s 2>&1");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("--duration \"0s\": a duration from 1s to 1h"));
  r = RunCommand(KpathdBinary() + " --json 2>&1");
  CHECK(r.status == 2);
}
