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
# The names civetweb loads OpenSSL 3 by, for TLS on /metrics (daemon/civetweb_openssl_names.c).
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
exit $fail
