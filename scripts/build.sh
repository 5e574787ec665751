#!/usr/bin/env bash
# Installs what is missing (Debian 12 packages) and builds kpathd into build/.
# Usage: scripts/build.sh [--test]   (--test also installs what the tests need, and makes
#   compiler warnings errors: KPATH_WERROR=ON, as CI builds)
# Environment: BUILD_DIR (default build), CMAKE_BUILD_TYPE (default RelWithDebInfo), JOBS,
#   KPATH_WERROR (ON or OFF: overrides the choice --test makes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh "$@"
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
werror=OFF
[[ " $* " == *" --test "* ]] && werror=ON
# shellcheck source=scripts/ccache.sh
source scripts/ccache.sh
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
  -DKPATH_WERROR="${KPATH_WERROR:-$werror}" "${ccache_args[@]}" >/dev/null
cmake --build "$build_dir" -j "$jobs"
