#include "support/cgroup_churn.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace kpath::testing {

std::optional<std::string> MemoryCgroupRoot() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::optional<std::string> v2;
  while (std::getline(in, line)) {
    // ... <mount point> <options> ... - <fstype> <source> <super options>
    std::istringstream f(line);
    std::vector<std::string> fields;
    for (std::string w; f >> w;) fields.push_back(w);
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 3 >= fields.size() + 1 || dash < 5) continue;
    const std::string& mount_point = fields[4];
    const std::string& fstype = fields[dash + 1];
    const std::string super_opts = dash + 3 < fields.size() ? fields[dash + 3] : "";
    if (fstype == "cgroup" && ("," + super_opts + ",").find(",memory,") != std::string::npos) {
      return mount_point;
    }
    if (fstype == "cgroup2" && !v2) {
      std::ifstream c(mount_point + "/cgroup.controllers");
      std::string controllers((std::istreambuf_iterator<char>(c)), {});
      if ((" " + controllers + " ").find(" memory") != std::string::npos) v2 = mount_point;
    }
  }
  return v2;
}

int ChurnCgroups(const std::string& parent, const std::string& prefix, int count) {
  int done = 0;
  for (int i = 0; i < count; ++i) {
    std::string dir = parent + "/" + prefix + "-" + std::to_string(i);
    if (mkdir(dir.c_str(), 0755) != 0) continue;
    if (rmdir(dir.c_str()) == 0) ++done;
  }
  return done;
}

}  // namespace kpath::testing
