#!/usr/bin/env bash
# The folding worlds (issue 19, D1) pass on the series kpathd exports, and each world fails on
# the series kpathd exported before (its `# landed:` values), so every world proves that it
# catches a phantom increment. Usage: check-folding.sh RULES_FILE WORLDS_FILE
set -euo pipefail
rules=$(realpath "$1") worlds=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$(dirname "$worlds")" && promtool test rules "$(basename "$worlds")")

# Split the file: the header (rule_files pointing at RULES_FILE), then one file per world.
awk -v dir="$tmp" -v rules="$rules" '
  /^rule_files:/ { print > (dir "/header"); print "  - " rules > (dir "/header"); skip = 1; next }
  skip && /^  - / { next }
  { skip = 0 }
  /^  - name:/ { n++; file = sprintf("%s/world%02d", dir, n) }
  { print > (n ? file : dir "/header") }' "$worlds"

failed=0 worlds_seen=0
for world in "$tmp"/world*; do
  worlds_seen=$((worlds_seen + 1))
  name=$(sed -n 's/^  - name: *//p' "$world")
  if ! grep -q "# landed: '" "$world"; then
    echo "MISSING: world \"$name\" has no '# landed:' series" >&2
    failed=1
    continue
  fi
  sed -E "s/values: '[^']*' *# landed: ('[^']*')/values: \1/" "$world" | cat "$tmp/header" - \
    >"$tmp/landed.yml"
  if promtool test rules "$tmp/landed.yml" >"$tmp/out" 2>&1; then
    echo "NOT PROVEN: world \"$name\" passes with the landed series too" >&2
    failed=1
  elif ! grep -q "FAILED:" "$tmp/out"; then
    echo "BROKEN: world \"$name\" with the landed series did not run:" >&2
    cat "$tmp/out" >&2
    failed=1
  else
    echo "world \"$name\": fails with the landed series ($(grep -c '^    expr:\|^    alertname:' "$tmp/out") checks), passes with the new"
  fi
done
((worlds_seen > 0)) || { echo "no worlds found in $worlds" >&2; exit 1; }
exit $failed
