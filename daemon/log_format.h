// How kpathd's log lines look on stderr. Under systemd stderr is a stream to journald, which
// files a line without a "<N>" prefix at the unit's default priority (info): `journalctl -p
// warning` would show no warning. So lines carry their syslog priority there, and only there
// (IsJournalStream, systemd_notify.h): stderr redirected to a file or a terminal gets none.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "spdlog/common.h"
#include "spdlog/pattern_formatter.h"

namespace kpath {

// syslog(3)'s priority for an spdlog level: critical 2, error 3, warning 4, info 6, debug and
// trace 7 (off: info).
int SyslogPriority(spdlog::level::level_enum level);

// spdlog's pattern for stderr: "<N>level: message" when stderr is journald's stream (journald
// stamps the time and reads the priority), "2026-12-02T01:02:03.456 level: message" otherwise.
std::unique_ptr<spdlog::formatter> StderrLogFormatter(bool to_journal);

// Writes `line` and a newline to stderr as an error, for the errors that end kpathd before its
// log is set up and for the command-line modes that have none: with "<3>" when stderr is
// journald's stream.
void PrintError(const std::string& line);

}  // namespace kpath
