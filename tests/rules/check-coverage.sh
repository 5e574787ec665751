#!/usr/bin/env bash
# Every alert of the rules file must be tested both ways in the promtool test files: at least one
# evaluation where it fires (non-empty exp_alerts) and one where it must stay silent
# (exp_alerts: []), in any of them. Usage: check-coverage.sh RULES_FILE TEST_FILE...
set -euo pipefail
rules=$1
shift
tests=("$@")
if ((${#tests[@]} == 0)); then
  echo "usage: $0 RULES_FILE TEST_FILE..." >&2
  exit 2
fi
mapfile -t alerts < <(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$rules")
if ((${#alerts[@]} == 0)); then
  echo "no alerts found in $rules" >&2
  exit 1
fi
# "<alert> fires" / "<alert> silent" for each alert_rule_test entry.
cases=$(awk '/alertname:/ { name = $2; getline; print name, ($0 ~ /exp_alerts: *\[\]/ ? "silent" : "fires") }' "${tests[@]}")
missing=0
for a in "${alerts[@]}"; do
  for way in fires silent; do
    if ! grep -qx "$a $way" <<<"$cases"; then
      echo "MISSING: no test where $a $way" >&2
      missing=1
    fi
  done
done
# And no test names an alert the rules do not have (a renamed alert would be tested vacuously).
while read -r name _; do
  # A here-string, not a pipe: grep -q quits at the first match, and under pipefail the
  # printf it leaves writing to a closed pipe would fail the check (status 141) on a busy host.
  if ! grep -qx "$name" <<<"$(printf '%s\n' "${alerts[@]}")"; then
    echo "UNKNOWN: the tests name $name, which the rules do not define" >&2
    missing=1
  fi
done <<<"$cases"
((missing == 0)) && echo "all ${#alerts[@]} alerts are tested firing and silent"
exit $missing
