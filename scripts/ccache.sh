# shellcheck shell=bash
# Sourced by the build scripts (build.sh, build-arm64.sh, fuzz.sh, test.sh's sanitizer build):
# sets ccache_args, the cmake arguments that put ccache in front of the compilers where it is
# installed (empty where not), keyed so that another checkout of the same sources (CI's fresh
# clone) hits the cache: paths in compile commands relative to the checkout (CCACHE_BASEDIR) and
# the build directory left out of the hash (CCACHE_NOHASHDIR: the debug information of a hit
# then names the directory of the build that filled the cache). Every compile still runs when
# the cache is cold or gone; it only saves time (the suite's builds take 20 of its minutes cold).
# shellcheck disable=SC2034  # read by the scripts that source this one
ccache_args=()
if command -v ccache >/dev/null; then
  CCACHE_BASEDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  export CCACHE_BASEDIR CCACHE_NOHASHDIR=true
  ccache_args=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
