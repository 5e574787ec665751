#!/usr/bin/env bash
# Builds the Debian package with CPack from the build tree and inspects it: the binary, the unit,
# the default configuration (a conffile), the rules, examples, dashboard and one runbook per
# alert; control fields and maintainer scripts; and that the packaged files are the repository's
# and the packaged binary runs.
# Usage: deb-package-test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$build" && cpack -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1) || {
  cat "$tmp/cpack.log" >&2
  echo "FAIL: cpack -G DEB failed" >&2
  exit 1
}
debs=("$tmp"/out/kpathd_*.deb)
[[ -f ${debs[0]} && ${#debs[@]} -eq 1 ]] || { ls -R "$tmp/out" >&2; echo "FAIL: expected one kpathd_*.deb" >&2; exit 1; }
deb=${debs[0]}
echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

fail=0
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's#^\./#/#' >"$tmp/contents"
expect_file() {
  if ! grep -qx "$1" "$tmp/contents"; then echo "FAIL: the package has no $1" >&2; fail=1; fi
}
expect_file /usr/sbin/kpathd
# The names civetweb loads OpenSSL 3 by, for TLS on /metrics (daemon/web/civetweb_openssl_names.c).
expect_file /usr/lib/kpathd/libkpath-civetweb-libssl.so
expect_file /usr/lib/kpathd/libkpath-civetweb-libcrypto.so
expect_file /etc/kpathd/kpathd.yaml
grep -qxE '(/usr)?/lib/systemd/system/kpathd.service' "$tmp/contents" ||
  { echo "FAIL: the package has no kpathd.service unit" >&2; fail=1; }
expect_file /usr/share/kpathd/prometheus/kpathd-rules.yml
expect_file /usr/share/kpathd/prometheus/prometheus.yml
expect_file /usr/share/kpathd/prometheus/set-runbook-base.sh
expect_file /usr/share/kpathd/alertmanager/alertmanager.yml
expect_file /usr/share/kpathd/grafana/kpathd-dashboard.json
expect_file /usr/share/doc/kpathd/README.md
for alert in $(sed -n 's/^ *- alert: *//p' "$src/deploy/prometheus/kpathd-rules.yml"); do
  expect_file "/usr/share/doc/kpathd/runbooks/$alert.md"
done
# Nothing from the build tree or the tests.
if grep -E 'test|/usr/local|\.o$|CMake' "$tmp/contents"; then
  echo "FAIL: the package carries build or test files (above)" >&2
  fail=1
fi

dpkg-deb -I "$deb" >"$tmp/info"
field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == kpathd ]] || { echo "FAIL: Package is '$(field Package)'" >&2; fail=1; }
[[ $(field Architecture) == "$(dpkg --print-architecture)" ]] || { echo "FAIL: Architecture is '$(field Architecture)'" >&2; fail=1; }
[[ -n $(field Version) ]] || { echo "FAIL: no Version" >&2; fail=1; }
# Shared libraries found by dpkg-shlibdeps: libbpf at least.
field Depends | grep -q 'libbpf' || { echo "FAIL: Depends '$(field Depends)' lacks libbpf" >&2; fail=1; }
for script in conffiles postinst prerm postrm; do
  grep -qE "^ +[0-9]+ bytes, +[0-9]+ lines +\*? *$script( |$)" "$tmp/info" ||
    { echo "FAIL: no $script in the control archive" >&2; fail=1; }
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/kpathd/kpathd.yaml ||
  { echo "FAIL: /etc/kpathd/kpathd.yaml is not a conffile" >&2; fail=1; }

# The packaged files are the repository's, and the binary runs.
dpkg-deb -x "$deb" "$tmp/root"
cmp "$tmp/root/usr/share/kpathd/prometheus/kpathd-rules.yml" "$src/deploy/prometheus/kpathd-rules.yml"
cmp "$tmp/root/etc/kpathd/kpathd.yaml" "$src/config/kpathd.yaml"
unit=
for u in "$tmp"/root/usr/lib/systemd/system/kpathd.service "$tmp"/root/lib/systemd/system/kpathd.service; do
  [[ -f $u ]] && unit=$u
done
cmp "$unit" "$src/systemd/kpathd.service"
"$tmp/root/usr/sbin/kpathd" --version | grep -q '^kpathd ' || { echo "FAIL: the packaged kpathd does not run" >&2; fail=1; }
"$tmp/root/usr/sbin/kpathd" --check-config "$tmp/root/etc/kpathd/kpathd.yaml" >/dev/null ||
  { echo "FAIL: the packaged configuration does not validate" >&2; fail=1; }
# The unit starts the binary where the package puts it, with the configuration it ships.
grep -q '^ExecStart=/usr/sbin/kpathd --config /etc/kpathd/kpathd.yaml' "$unit" ||
  { echo "FAIL: the unit does not start /usr/sbin/kpathd with /etc/kpathd/kpathd.yaml" >&2; fail=1; }
if file "$tmp/root/usr/sbin/kpathd" 2>/dev/null | grep -q 'not stripped'; then
  echo "FAIL: the packaged binary is not stripped" >&2
  fail=1
fi
((fail == 0)) && echo "contents, control fields, conffiles and maintainer scripts as expected: $(wc -l <"$tmp/contents") entries, Depends: $(field Depends)"
((fail == 0)) || exit $fail

# The maintainer scripts, run by the real dpkg in a Debian 12 root (tests/systemd/rootfs.sh's,
# through an overlay that goes away with this test's mount namespace): what they leave enabled,
# masked and configured across install, reinstall, remove, install again and purge. (Starting,
# restarting and stopping need systemd as PID 1: the systemd stage, tests/systemd/, checks them.)
if [[ $EUID -ne 0 ]]; then
  echo "WARN: not root: the maintainer scripts were not run" >&2
  exit 0
fi
rootfs_status=0
rootfs=$("$src/tests/systemd/rootfs.sh") || rootfs_status=$?
if ((rootfs_status == 2)); then
  echo "WARN: no Debian 12 root to run the maintainer scripts in (above): not run" >&2
  exit 0
fi
((rootfs_status == 0)) || { echo "FAIL: tests/systemd/rootfs.sh failed" >&2; exit 1; }
mkdir -p "$tmp/upper" "$tmp/work" "$tmp/merged"
# Sourced by the scripts run in the root: ROOT LOWER UPPER WORK DEB -> an overlay of the cached
# root at ROOT with the package's directory bound in, $pkg its path there, in_root a command.
cat >"$tmp/overlay.sh" <<'OVERLAY'
root=$1
mount -t overlay overlay -o "lowerdir=$2,upperdir=$3,workdir=$4" "$root"
mkdir -p "$root/root/pkg"
mount --bind "$(dirname "$5")" "$root/root/pkg"
pkg=/root/pkg/$(basename "$5")
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
OVERLAY
cat >"$tmp/lifecycle.sh" <<'LIFECYCLE'
set -eu
. "$(dirname "$0")/overlay.sh"
wants=$root/etc/systemd/system/multi-user.target.wants/kpathd.service
mask=$root/etc/systemd/system/kpathd.service
state() {  # enabled|disabled, masked|unmasked
  if [ -L "$wants" ]; then printf enabled; else printf disabled; fi
  if [ -L "$mask" ] && [ "$(readlink "$mask")" = /dev/null ]; then echo ,masked; else echo ,unmasked; fi
}
expect() {
  got=$(state)
  if [ "$got" != "$2" ]; then echo "FAIL: after $1 kpathd.service is $got, expected $2" >&2; exit 1; fi
  echo "  after $1: $got"
}
in_root dpkg -i "$pkg" >/dev/null 2>&1
expect "dpkg -i" enabled,unmasked
echo "sampling_interval: 7s  # edited" >>"$root/etc/kpathd/kpathd.yaml"
in_root dpkg -i "$pkg" >/dev/null 2>&1
expect "dpkg -i again (reinstall)" enabled,unmasked
grep -q '# edited' "$root/etc/kpathd/kpathd.yaml" || { echo "FAIL: reinstalling lost the edited conffile" >&2; exit 1; }
in_root dpkg -r kpathd >/dev/null
# As with dh_installsystemd's scripts, the enable link stays (dangling) until purge.
expect "dpkg -r" enabled,unmasked
grep -q '# edited' "$root/etc/kpathd/kpathd.yaml" || { echo "FAIL: dpkg -r removed the edited conffile" >&2; exit 1; }
in_root dpkg -i "$pkg" >/dev/null 2>&1
expect "dpkg -r, then dpkg -i" enabled,unmasked
# What the postrm of kpathd before 0.1.0's issue 17 fixes did on remove.
in_root dpkg -r kpathd >/dev/null
in_root env DPKG_MAINTSCRIPT_PACKAGE=kpathd deb-systemd-helper mask kpathd.service >/dev/null
expect "dpkg -r, then deb-systemd-helper mask" enabled,masked
in_root dpkg -i "$pkg" >/dev/null 2>&1
expect "dpkg -r, masked as by earlier packages, then dpkg -i" enabled,unmasked
in_root systemctl disable kpathd.service >/dev/null 2>&1
in_root dpkg -i "$pkg" >/dev/null 2>&1
expect "systemctl disable, then dpkg -i (an administrator's choice stays)" disabled,unmasked
in_root dpkg -P kpathd >/dev/null
expect "dpkg -P" disabled,unmasked
if [ -e "$root/etc/kpathd/kpathd.yaml" ]; then echo "FAIL: dpkg -P left /etc/kpathd/kpathd.yaml" >&2; exit 1; fi
if ls "$root"/var/lib/systemd/deb-systemd-helper-enabled/ 2>/dev/null | grep -q kpathd; then
  echo "FAIL: dpkg -P left deb-systemd-helper state for kpathd" >&2; exit 1
fi
LIFECYCLE
echo "maintainer scripts, run by dpkg in $rootfs (overlay):"
unshare -m --propagation private sh "$tmp/lifecycle.sh" "$tmp/merged" "$rootfs" "$tmp/upper" "$tmp/work" "$deb" ||
  { echo "FAIL: the maintainer scripts (above)" >&2; exit 1; }
echo "install, reinstall, remove, install again, purge: enabled, never masked, conffile kept until purge"

# The container image (deploy/kubernetes/Dockerfile): debian:12-slim path-excludes
# /usr/share/doc/* (its /etc/dpkg/dpkg.cfg.d/docker, written here as that image has it), which
# would drop the runbooks `kpathd diagnose` points to. The real dpkg installs the package in the
# same Debian 12 root with that file and the Dockerfile's own dpkg.cfg.d line: every runbook and
# the README must be there.
diagnose_dir=$(grep -ao '/usr/share/doc/kpathd/runbooks/' "$tmp/root/usr/sbin/kpathd" | head -1)
[[ -n $diagnose_dir ]] || { echo "FAIL: kpathd diagnose names no /usr/share/doc/kpathd/runbooks/" >&2; exit 1; }
dockerfile_cfg=$(sed -n "s|^RUN echo '\(path-include [^']*\)' > \(/etc/dpkg/dpkg.cfg.d/[a-z-]*\)$|\1 \2|p" \
  "$src/deploy/kubernetes/Dockerfile")
[[ -n $dockerfile_cfg ]] || { echo "FAIL: the Dockerfile writes no dpkg.cfg.d path-include" >&2; exit 1; }
rm -rf "$tmp/upper" "$tmp/work" && mkdir -p "$tmp/upper" "$tmp/work"
cat >"$tmp/image.sh" <<'IMAGE'
set -eu
. "$(dirname "$0")/overlay.sh"
printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\n' \
  >"$root/etc/dpkg/dpkg.cfg.d/docker"
printf '%s %s\n' "$6" "$7" >"$root$8"
in_root dpkg -i "$pkg" >/dev/null 2>&1
[ -f "$root/usr/share/doc/kpathd/README.md" ] || { echo "FAIL: no README.md in the image" >&2; exit 1; }
ls "$root$9" | grep -c '\.md$'
IMAGE
read -r include_opt include_glob include_file <<<"$dockerfile_cfg"
alerts=$(sed -n 's/^ *- alert: *//p' "$src/deploy/prometheus/kpathd-rules.yml" | sort -u | wc -l)
kept=$(unshare -m --propagation private sh "$tmp/image.sh" "$tmp/merged" "$rootfs" "$tmp/upper" \
  "$tmp/work" "$deb" "$include_opt" "$include_glob" "$include_file" "$diagnose_dir") ||
  { echo "FAIL: installing the package as the image does (above)" >&2; exit 1; }
# The runbooks' index (README.md) and one page per alert (an alert of two tiers has one page).
if ((kept < alerts + 1)); then
  echo "FAIL: the image keeps $kept pages in $diagnose_dir, the rules have $alerts alerts and an index" >&2
  exit 1
fi
echo "container image: $kept runbooks kept in $diagnose_dir under debian:12-slim's path-exclude (Dockerfile: $include_opt $include_glob)"
