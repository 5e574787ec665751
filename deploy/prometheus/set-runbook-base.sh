#!/bin/sh
# Points every runbook_url of kpathd's rules at your copy of the runbooks.
#
# The shipped rules link to https://kpathd.invalid/docs/runbooks/<Alert>.md: the part after the
# base is the runbook's path in the kpathd repository (docs/runbooks/), and the base is a
# reserved name that never resolves, so a link nobody configured is visibly broken instead of
# silently pointing somewhere else. Give the base under which docs/runbooks/ is browsable:
#
#   set-runbook-base.sh https://git.example.com/ops/kpathd/-/blob/main kpathd-rules.yml
#   set-runbook-base.sh https://wiki.example.com/kpathd prometheusrule.yaml
#
# Usage: set-runbook-base.sh BASE_URL FILE...   (files are edited in place)
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 BASE_URL FILE..." >&2
  exit 2
fi
base=${1%/}
shift
case $base in
  *'|'*) echo "$0: the base URL must not contain '|'" >&2; exit 2 ;;
esac
for f in "$@"; do
  # Also re-bases rules already re-based once: anything before /docs/runbooks/ is the base.
  sed -i -E "s|(runbook_url: *)[^ ]*/docs/runbooks/|\1$base/docs/runbooks/|" "$f"
done
