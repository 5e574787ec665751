#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a bounded time, seeded
# with the real fixture files; prints runs and coverage per target and fails on any crash.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 60; CI uses a few seconds)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
scripts/install-deps.sh --test
# shellcheck source=scripts/ccache.sh
source scripts/ccache.sh
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKPATH_FUZZ=ON -DKPATH_BUILD_TESTS=OFF -DKPATH_WERROR=ON "${ccache_args[@]}" >/dev/null
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target kpath_fuzz_all
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for seeds in "$build_dir"/fuzz-seeds/*.txt; do
  name=$(basename "$seeds" .txt)
  corpus="$work/$name"
  mkdir -p "$corpus"
  while read -r f; do [ -f "$f" ] && cp "$f" "$corpus/$(echo "$f" | md5sum | cut -c1-16)"; done <"$seeds"
  log="$work/$name.log"
  if "$build_dir/tests/fuzz/fuzz_$name" -max_total_time="$seconds" -max_len=262144 \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/$name-" "$corpus" >"$log" 2>&1; then
    runs=$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' || echo '?')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
    printf 'fuzz %-18s ok: %s inputs in %ss, coverage %s\n' "$name" "$runs" "$seconds" "$cov"
  else
    echo "fuzz $name FAILED:"; tail -40 "$log"
    ls "$work/$name-"* 2>/dev/null && cp "$work/$name-"* . 2>/dev/null || true
    failed=1
  fi
done
exit $failed
