// The report of `kpathd diagnose`: text for a person, JSON for scripts.
#include <cmath>
#include <string_view>

#include "daemon/diagnose/rule.h"
#include "daemon/events/event_json.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace kpath {

namespace {

using diagnose::Seconds;

std::string StateWord(Finding::State s) {
  switch (s) {
    case Finding::State::kFound:
      return "found";
    case Finding::State::kOk:
      return "ok";
    case Finding::State::kNotChecked:
      return "not_checked";
  }
  return "?";
}

// Any byte of a comm or a kernel name escaped, invalid UTF-8 replaced (the events' encoder).
std::string Json(std::string_view s) { return JsonString(s); }

std::string Json(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

std::string Json(const std::vector<std::string>& v) {
  std::vector<std::string> items;
  for (const std::string& s : v) items.push_back(Json(std::string_view(s)));
  return fmt::format("[{}]", fmt::join(items, ","));
}

}  // namespace

std::string RenderText(const Diagnosis& d) {
  std::string out;
  out += fmt::format("kpathd diagnose: watched this host for {}{} (Linux {}, {} CPUs).\n",
                     Seconds(d.elapsed_seconds), d.interrupted ? ", stopped early" : "",
                     d.kernel_release.empty() ? "?" : d.kernel_release, d.cpus);
  std::vector<std::string> attached, missing;
  for (const ProbeStatus& p : d.probes) {
    if (p.attached) {
      attached.push_back(fmt::format("{} ({})", p.probe, p.mechanism));
    } else {
      missing.push_back(p.probe);
    }
  }
  out += fmt::format("Probes attached: {} of {}{}{}.\n", attached.size(), d.probes.size(),
                     attached.empty() ? "" : ": ", fmt::join(attached, ", "));
  if (!missing.empty()) {
    out += fmt::format(
        "Not attached: {} (run as root; kpathd's log at --log-level info says "
        "why).\n",
        fmt::join(missing, ", "));
  }
  if (!d.failing_collectors.empty()) {
    out += fmt::format("Failing collectors: {}.\n", fmt::join(d.failing_collectors, ", "));
  }
  std::vector<std::string> found;
  for (const Finding& f : d.findings) {
    const char* word = f.state == Finding::State::kFound ? "FOUND"
                       : f.state == Finding::State::kOk  ? "ok"
                                                         : "n/a";
    out += fmt::format("\n{:<6} {} ({}): {}\n", word, f.title, f.seeds, f.summary);
    if (f.state == Finding::State::kFound) found.push_back(f.title);
    for (const std::string& e : f.evidence) out += fmt::format("         - {}\n", e);
    if (f.state == Finding::State::kFound) {
      out += fmt::format("       What to do (runbooks: {}):\n", fmt::join(f.runbooks, ", "));
      for (const std::string& fix : f.fixes) out += fmt::format("         * {}\n", fix);
    }
  }
  out += found.empty() ? fmt::format("\nNothing found in {}.\n", Seconds(d.elapsed_seconds))
                       : fmt::format("\nFound: {}.\n", fmt::join(found, "; "));
  out += "Runbooks: docs/runbooks/<name>.md (installed in /usr/share/doc/kpathd/runbooks/).\n";
  return out;
}

std::string RenderJson(const Diagnosis& d) {
  std::vector<std::string> probes;
  for (const ProbeStatus& p : d.probes) {
    probes.push_back(fmt::format(R"({{"probe":{},"mechanism":{},"attached":{}}})",
                                 Json(std::string_view(p.probe)),
                                 Json(std::string_view(p.mechanism)), p.attached));
  }
  std::vector<std::string> findings;
  for (const Finding& f : d.findings) {
    std::vector<std::string> culprits;
    for (const Culprit& c : f.culprits) {
      std::vector<std::string> labels;
      for (const auto& [k, v] : c.labels)
        labels.push_back(
            fmt::format("{}:{}", Json(std::string_view(k)), Json(std::string_view(v))));
      culprits.push_back(fmt::format(R"({{"labels":{{{}}},"value":{},"unit":{}}})",
                                     fmt::join(labels, ","), Json(c.value),
                                     Json(std::string_view(c.unit))));
    }
    findings.push_back(fmt::format(
        R"({{"id":{},"title":{},"seeds":{},"state":{},"summary":{},"evidence":{},"culprits":[{}],"fixes":{},"runbooks":{}}})",
        Json(std::string_view(f.id)), Json(std::string_view(f.title)),
        Json(std::string_view(f.seeds)), Json(std::string_view(StateWord(f.state))),
        Json(std::string_view(f.summary)), Json(f.evidence), fmt::join(culprits, ","),
        Json(f.fixes), Json(f.runbooks)));
  }
  return fmt::format(
      R"({{"found":{},"elapsed_seconds":{},"interrupted":{},"kernel_release":{},"cpus":{},"probes":[{}],"failing_collectors":{},"findings":[{}]}})"
      "\n",
      d.AnythingFound(), Json(d.elapsed_seconds), d.interrupted,
      Json(std::string_view(d.kernel_release)), d.cpus, fmt::join(probes, ","),
      Json(d.failing_collectors), fmt::join(findings, ","));
}

}  // namespace kpath
