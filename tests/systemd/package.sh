#!/usr/bin/env bash
# Builds kpathd's Debian package with CPack from a build tree (the project's one way of making
# it: deploy/debian/packaging.cmake) and prints the .deb's path on stdout.
#
# Usage: package.sh BUILD_DIR OUTDIR [VERSION]
#   VERSION  overrides the package version (CPACK_DEBIAN_PACKAGE_VERSION), e.g. 0.1.0+1 for a
#            "newer build" to test an upgrade with; the contents are the same build's.
# Exit 0 with the path; 1 when cpack fails (its log is printed to stderr).
set -euo pipefail
if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 BUILD_DIR OUTDIR [VERSION]" >&2
  exit 1
fi
build=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
version=${3:-}
[[ -f $build/CPackConfig.cmake ]] || { echo "package: FAIL: $build has no CPackConfig.cmake (not a configured build tree)" >&2; exit 1; }

# Each run in a scratch directory of its own: two packagings never share CPack's staging tree.
stage=$(mktemp -d "$out/.cpack.XXXXXX")
trap 'rm -rf "$stage"' EXIT
args=(-G DEB -B "$stage")
[[ -n $version ]] && args+=(-D "CPACK_DEBIAN_PACKAGE_VERSION=$version")
if ! (cd "$build" && cpack "${args[@]}") >"$stage/cpack.log" 2>&1; then
  tail -40 "$stage/cpack.log" >&2
  echo "package: FAIL: cpack ${args[*]} failed in $build (log above)" >&2
  exit 1
fi
debs=("$stage"/kpathd_*.deb)
if [[ ! -f ${debs[0]} || ${#debs[@]} -ne 1 ]]; then
  ls -la "$stage" >&2
  echo "package: FAIL: expected one kpathd_*.deb from cpack" >&2
  exit 1
fi
if [[ -n $version && $(dpkg-deb -f "${debs[0]}" Version) != "$version" ]]; then
  echo "package: FAIL: asked for version $version, cpack made $(dpkg-deb -f "${debs[0]}" Version)" >&2
  exit 1
fi
mv -f "${debs[0]}" "$out/"
echo "$out/$(basename "${debs[0]}")"
