// Events in the journal as structured fields, through journald's native protocol spoken by hand
// (one datagram of fields to /run/systemd/journal/socket, as systemd's JOURNAL_NATIVE_PROTOCOL
// documents it for reimplementation), for the reason systemd_notify.h gives: libsystemd would
// cost ~0.9 MiB of resident memory for one function.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "daemon/events/event_ring.h"

namespace kpath {

inline constexpr std::string_view kJournalSocket = "/run/systemd/journal/socket";

// Appends one field. A value holding a newline (a stack, one frame a line) or any byte below
// 0x20 but tab takes the binary-safe form: NAME "\n", its length as 64-bit little endian, the
// bytes, "\n"; any other value NAME=value "\n".
void AppendJournalField(std::string& datagram, std::string_view name, std::string_view value);

// The datagram of an event: MESSAGE, PRIORITY (5, notice), SYSLOG_IDENTIFIER=kpathd,
// KPATH_EVENT=<kind>, KPATH_SEQ, then each field as KPATH_<KEY> (a list one item a line).
std::string JournalEntry(const StoredEvent& event);

// Sends one datagram to journald's socket at `socket_path`.
absl::Status SendJournalDatagram(std::string_view socket_path, std::string_view datagram);

}  // namespace kpath
