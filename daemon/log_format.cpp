#include "daemon/log_format.h"

#include <unistd.h>

#include <cstdio>

#include "daemon/systemd_notify.h"

namespace kpath {
namespace {

// "%*": the "<N>" syslog priority prefix of the message's level.
class PriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char prefix[] = {'<', static_cast<char>('0' + SyslogPriority(msg.level)), '>'};
    dest.append(prefix, prefix + sizeof(prefix));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PriorityFlag>();
  }
};

}  // namespace

int SyslogPriority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical:
      return 2;
    case spdlog::level::err:
      return 3;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::debug:
    case spdlog::level::trace:
      return 7;
    default:
      return 6;
  }
}

std::unique_ptr<spdlog::formatter> StderrLogFormatter(bool to_journal) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<PriorityFlag>('*');
  formatter->set_pattern(to_journal ? "%*%l: %v" : "%Y-%m-%dT%H:%M:%S.%e %l: %v");
  return formatter;
}

void PrintError(const std::string& line) {
  std::fprintf(stderr, "%s%s\n", IsJournalStream(STDERR_FILENO) ? "<3>" : "", line.c_str());
}

}  // namespace kpath
