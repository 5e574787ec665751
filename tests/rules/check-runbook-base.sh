#!/usr/bin/env bash
# deploy/prometheus/set-runbook-base.sh rewrites every runbook_url (and only those) of a copy of
# the rules, which still passes promtool. Usage: check-runbook-base.sh SCRIPT RULES_FILE
set -euo pipefail
script=$1 rules=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$rules" "$tmp/rules.yml"
"$script" https://git.example.com/ops/kpathd/-/blob/main/ "$tmp/rules.yml"
total=$(grep -c 'runbook_url:' "$rules")
rebased=$(grep -c 'runbook_url: https://git.example.com/ops/kpathd/-/blob/main/docs/runbooks/Kpath[A-Za-z]*\.md$' "$tmp/rules.yml")
if [[ $total -eq 0 || $rebased -ne $total ]]; then
  echo "$rebased of $total runbook_url lines re-based" >&2
  exit 1
fi
# Nothing else changed.
diff <(grep -v runbook_url: "$rules") <(grep -v runbook_url: "$tmp/rules.yml")
# Re-basing twice works (anything before /docs/runbooks/ is the base).
"$script" https://wiki.example.com/kpathd "$tmp/rules.yml"
[[ $(grep -c 'runbook_url: https://wiki.example.com/kpathd/docs/runbooks/' "$tmp/rules.yml") -eq $total ]]
promtool check rules "$tmp/rules.yml" >/dev/null
echo "all $total runbook_url lines re-based"
