#include "daemon/log_format.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "daemon/systemd_notify.h"
#include "spdlog/details/log_msg.h"
#include "support/temp_dir.h"

namespace {

std::string Format(bool to_journal, spdlog::level::level_enum level) {
  auto formatter = kpath::StderrLogFormatter(to_journal);
  spdlog::details::log_msg msg("kpathd", level, "kallsyms unavailable");
  spdlog::memory_buf_t out;
  formatter->format(msg, out);
  return fmt::to_string(out);
}

// Sets JOURNAL_STREAM for the test's lifetime, and restores what was there.
class JournalStreamEnv {
 public:
  explicit JournalStreamEnv(const std::string& value) {
    if (const char* old = getenv("JOURNAL_STREAM")) old_ = old;
    setenv("JOURNAL_STREAM", value.c_str(), 1);
  }
  ~JournalStreamEnv() {
    if (old_) {
      setenv("JOURNAL_STREAM", old_->c_str(), 1);
    } else {
      unsetenv("JOURNAL_STREAM");
    }
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("journald reads each level at its syslog priority", "[log][systemd]") {
  CHECK(kpath::SyslogPriority(spdlog::level::critical) == 2);
  CHECK(kpath::SyslogPriority(spdlog::level::err) == 3);
  CHECK(kpath::SyslogPriority(spdlog::level::warn) == 4);
  CHECK(kpath::SyslogPriority(spdlog::level::info) == 6);
  CHECK(kpath::SyslogPriority(spdlog::level::debug) == 7);
  CHECK(kpath::SyslogPriority(spdlog::level::trace) == 7);
}

TEST_CASE("lines to journald start with <N> and no timestamp; elsewhere with a timestamp",
          "[log][systemd]") {
  CHECK(Format(true, spdlog::level::warn) == "<4>warning: kallsyms unavailable\n");
  CHECK(Format(true, spdlog::level::err) == "<3>error: kallsyms unavailable\n");
  CHECK(Format(true, spdlog::level::critical) == "<2>critical: kallsyms unavailable\n");
  CHECK(Format(true, spdlog::level::info) == "<6>info: kallsyms unavailable\n");
  CHECK(Format(true, spdlog::level::debug) == "<7>debug: kallsyms unavailable\n");
  const std::string plain = Format(false, spdlog::level::warn);
  INFO(plain);
  CHECK(plain.find('<') == std::string::npos);
  // "2026-12-02T01:02:03.456 warning: ..."
  CHECK(plain.size() == 24 + std::string("warning: kallsyms unavailable\n").size());
  CHECK(plain.substr(23) == " warning: kallsyms unavailable\n");
}

TEST_CASE("JOURNAL_STREAM names a file by decimal device and inode", "[log][systemd]") {
  CHECK(kpath::JournalStreamNames("8:1234", 8, 1234));
  CHECK(kpath::JournalStreamNames("66306:18446744073709551615", 66306, ~ino_t{0}));
  CHECK_FALSE(kpath::JournalStreamNames("8:1235", 8, 1234));
  CHECK_FALSE(kpath::JournalStreamNames("9:1234", 8, 1234));
  CHECK_FALSE(kpath::JournalStreamNames(nullptr, 8, 1234));
  for (const char* bad : {"", ":", "8", "8:", ":1234", "8:1234:", " 8:1234", "8:1234 ", "8:-1",
                          "0x8:1234", "8;1234"}) {
    INFO("JOURNAL_STREAM=\"" << bad << "\"");
    CHECK_FALSE(kpath::JournalStreamNames(bad, 8, 1234));
  }
}

TEST_CASE("a descriptor is journald's stream only when JOURNAL_STREAM names that very file",
          "[log][systemd]") {
  kpath::testing::TempDir dir;
  const int named = open((dir / "journal").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  const int other = open((dir / "elsewhere").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(named >= 0);
  REQUIRE(other >= 0);
  struct stat st {};
  REQUIRE(fstat(named, &st) == 0);
  {
    JournalStreamEnv env(std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino));
    CHECK(kpath::IsJournalStream(named));
    // Under systemd, but stderr redirected (kpathd ... 2>file): no prefixes there.
    CHECK_FALSE(kpath::IsJournalStream(other));
  }
  {
    JournalStreamEnv env("not a stream");
    CHECK_FALSE(kpath::IsJournalStream(named));
  }
  close(named);
  close(other);
}
