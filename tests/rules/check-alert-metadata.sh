#!/usr/bin/env bash
# Every alert of the rules file has a severity label, a summary, a description and a runbook_url
# ending in docs/runbooks/<Alert>.md, and that runbook exists in the repository.
# Usage: check-alert-metadata.sh RULES_FILE RUNBOOK_DIR
set -euo pipefail
rules=$1 runbooks=$2
bad=0
# One block per alert: from "- alert:" to the next "- alert:"/"- record:"/"- name:".
awk '
  /^ *- (alert|record|name):/ { if (alert != "") print alert "\t" sev "\t" sum "\t" desc "\t" url
                               alert = ""; sev = sum = desc = url = "" }
  /^ *- alert:/               { alert = $3 }
  /^ *severity: *(critical|warning|info) *$/ { sev = $2 }
  /^ *summary:/               { sum = "yes" }
  /^ *description:/           { desc = "yes" }
  /^ *runbook_url:/           { url = $2 }
  END                         { if (alert != "") print alert "\t" sev "\t" sum "\t" desc "\t" url }
' "$rules" >/tmp/kpath-alert-metadata.$$
n=0
while IFS=$'\t' read -r alert sev sum desc url; do
  n=$((n + 1))
  [[ -n $sev ]] || { echo "$alert: no severity label (critical, warning or info)" >&2; bad=1; }
  [[ $sum == yes ]] || { echo "$alert: no summary annotation" >&2; bad=1; }
  [[ $desc == yes ]] || { echo "$alert: no description annotation" >&2; bad=1; }
  [[ $url == */docs/runbooks/$alert.md ]] || { echo "$alert: runbook_url '$url' does not end in /docs/runbooks/$alert.md" >&2; bad=1; }
  [[ -s $runbooks/$alert.md ]] || { echo "$alert: no runbook $runbooks/$alert.md" >&2; bad=1; }
  grep -q "^# $alert\$" "$runbooks/$alert.md" 2>/dev/null || { echo "$alert: $runbooks/$alert.md does not start with '# $alert'" >&2; bad=1; }
done </tmp/kpath-alert-metadata.$$
rm -f /tmp/kpath-alert-metadata.$$
((n > 0)) || { echo "no alert found in $rules" >&2; exit 1; }
((bad == 0)) && echo "all $n alerts have severity, summary, description and a runbook"
exit $bad
