#include "daemon/events/journal_entry.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "fmt/format.h"

namespace kpath {
namespace {

bool NeedsBinaryForm(std::string_view value) {
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') return true;
  }
  return false;
}

// KPATH_<KEY>: journal field names are upper-case letters, digits and underscores.
std::string FieldName(std::string_view key) {
  std::string name = "KPATH_";
  for (char c : key) {
    name += absl::ascii_isalnum(static_cast<unsigned char>(c))
                ? absl::ascii_toupper(static_cast<unsigned char>(c))
                : '_';
  }
  return name.substr(0, 64);  // journald's limit
}

}  // namespace

void AppendJournalField(std::string& datagram, std::string_view name, std::string_view value) {
  datagram.append(name);
  if (!NeedsBinaryForm(value)) {
    datagram += '=';
    datagram.append(value);
    datagram += '\n';
    return;
  }
  datagram += '\n';
  uint64_t size = value.size();
  for (int i = 0; i < 8; ++i) datagram += static_cast<char>((size >> (8 * i)) & 0xFF);
  datagram.append(value);
  datagram += '\n';
}

std::string JournalEntry(const StoredEvent& stored) {
  const Event& e = stored.event;
  std::string d;
  AppendJournalField(d, "MESSAGE", e.message);
  AppendJournalField(d, "PRIORITY", "5");
  AppendJournalField(d, "SYSLOG_IDENTIFIER", "kpathd");
  AppendJournalField(d, "KPATH_EVENT", e.kind);
  AppendJournalField(d, "KPATH_SEQ", std::to_string(stored.seq));
  for (const EventField& field : e.fields) {
    const std::string name = FieldName(field.key);
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            AppendJournalField(d, name, v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            AppendJournalField(d, name, std::to_string(v));
          } else if constexpr (std::is_same_v<T, double>) {
            AppendJournalField(d, name, fmt::format("{}", v));
          } else {
            std::string joined;
            for (size_t i = 0; i < v.size(); ++i) {
              if (i > 0) joined += '\n';
              joined += v[i];
            }
            AppendJournalField(d, name, joined);
          }
        },
        field.value);
  }
  return d;
}

absl::Status SendJournalDatagram(std::string_view socket_path, std::string_view datagram) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(fmt::format("journal socket \"{}\": bad path", socket_path));
  }
  std::memcpy(address.sun_path, socket_path.data(), socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "journal socket");
  const ssize_t sent = sendto(fd, datagram.data(), datagram.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
                              reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const int error = errno;
  close(fd);
  if (sent < 0) return absl::ErrnoToStatus(error, fmt::format("send to {}", socket_path));
  return absl::OkStatus();
}

}  // namespace kpath
