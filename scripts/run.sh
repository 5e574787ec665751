#!/usr/bin/env bash
# Quick start: install what is missing, build, and run kpathd in the foreground with built-in
# defaults (metrics on http://0.0.0.0:9477/metrics). Extra arguments go to kpathd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec "${BUILD_DIR:-build}/daemon/kpathd" "$@"
