# shellcheck shell=bash
# Sourced by the root stages' scripts (tests/container/run.sh, tests/systemd/run.sh): their
# progress lines, "[NAME  12.3s] text", timed from the moment this file is sourced, and the
# count of failed checks. The caller sets stage_name first.
#   log TEXT    a progress line
#   pass TEXT   "ok: TEXT"
#   fail TEXT   "FAIL: TEXT", and failures counts it (the script exits 1 when it is not 0)
# shellcheck disable=SC2154  # stage_name: set by the caller
t0=$EPOCHREALTIME
failures=0
elapsed() { awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%6.1f", b - a }'; }
log() { printf '[%s %ss] %s\n' "$stage_name" "$(elapsed)" "$*"; }
pass() { log "ok: $*"; }
fail() {
  log "FAIL: $*"
  failures=$((failures + 1))
}
