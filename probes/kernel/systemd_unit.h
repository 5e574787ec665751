// The systemd unit a cgroup belongs to, read from the cgroup's path, as the `unit` label of
// kpath_cgroup_mkdir_total / kpath_cgroup_rmdir_total. Pure functions: tested on real names.
//
// Rules (probes/cgroups/README.md):
//  1. The unit is the deepest path component that names a unit with a cgroup: *.service,
//     *.scope, *.slice, *.socket, *.mount, *.swap. "/system.slice/foo.service/sub" ->
//     "foo.service". A path without one ("/", "/docker/<id>") -> "none".
//  2. Transient parts of the name become "*", so that units started by the thousand (systemd-run,
//     logins, containers, pods) share one label value:
//       - a UUID (8-4-4-4-12 hex digits, "-" or "_" between groups);
//       - a token (run of letters and digits) of 16+ hex digits with a decimal digit among them
//         (docker-<id>.scope, cri-containerd-<id>.scope, libpod-<id>.scope);
//       - a token of decimal digits, alone or after one letter ("42", "u123", "c3", "p1234"),
//         except after a "." that follows a kept word (versions: php8.2-fpm.service stays);
//       - letters followed by 8+ hex digits with a decimal digit among them ("r<hex>" -> "*",
//         "pod<hex>" -> "pod*": one letter is a systemd marker and goes, a word stays);
//     the first token of a name is folded only as an id or UUID, and "*"s separated only by "-",
//     "_", "." or ":" merge into one. Per-user units keep their uid (user@1000.service,
//     user-1000.slice, user-runtime-dir@1000.service): their number is bounded by the host's users.
//     Examples: run-u123.service -> run-*.service, run-r<hex>.scope -> run-*.scope,
//     session-42.scope -> session-*.scope, docker-<64 hex>.scope -> docker-*.scope,
//     kubepods-burstable-pod<uid>.slice -> kubepods-burstable-pod*.slice,
//     systemd-coredump@0-1234-0.service -> systemd-coredump@*.service,
//     getty@tty1.service -> getty@tty1.service (template instances stay unless transient).
#pragma once

#include <string>
#include <string_view>

namespace kpath {

inline constexpr std::string_view kNoUnit = "none";

// The folded unit of a cgroup path relative to its hierarchy ("/system.slice/foo.service").
std::string SystemdUnitOfCgroupPath(std::string_view path);

// The same for the end of a path whose beginning was cut (`truncated`): the first, partial
// component is ignored.
std::string SystemdUnitOfPathTail(std::string_view tail, bool truncated);

// Rule 2 alone, on a unit name with its suffix ("run-u123.service" -> "run-*.service"). A name
// without a unit suffix is folded the same way.
std::string FoldTransientUnitName(std::string_view unit);

}  // namespace kpath
