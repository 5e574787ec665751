#!/usr/bin/env bash
# Install what is missing, build, and run every test: unit tests (fixtures), integration tests
# (real kernel and real BPF, as root), golden /metrics and promtool checks.
# Environment: BUILD_DIR (default build), CTEST_ARGS (extra ctest arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --test
build_dir=${BUILD_DIR:-build}
# Integration tests start daemons and load BPF programs: run them one at a time.
ctest --test-dir "$build_dir" --output-on-failure --timeout 300 ${CTEST_ARGS:-}
