#!/usr/bin/env bash
# deploy/kubernetes/ through Debian 12's kubectl (1.20, unpacked by scripts/install-deps.sh --test)
# and the Kubernetes API's schema (python3-kubernetes, the 1.22 API's models):
#   1. `kubectl kustomize` builds the kustomization offline: every listed file is there and
#      decodes as a Kubernetes object, and the build holds each manifest once;
#   2. every object of a built-in kind fits the API's schema (kubernetes-schema-check.py: field
#      names, types, required fields); the two prometheus-operator CRDs have no schema here.
# `kubectl apply --dry-run=client -k deploy/kubernetes/` itself needs an API server even with
# 1.20's client dry run (it asks the server for the kinds' REST mapping and, to validate, its
# OpenAPI schema): it is the check to run against a real cluster (deploy/README.md). Fails, never
# skips, when kubectl or the schema is missing.
# Usage: kubernetes-kubectl-test.sh SOURCE_DIR [KUBECTL]
set -euo pipefail
src=$1
kubectl=${2:-${KPATH_KUBECTL_CACHE:-/var/cache/kpathd-kubectl}/usr/bin/kubectl}
if [[ ! -x $kubectl ]]; then
  echo "FAIL: no $kubectl: scripts/install-deps.sh --test unpacks Debian's kubernetes-client there" >&2
  exit 1
fi
version=$("$kubectl" version --client --short 2>/dev/null || "$kubectl" version --client)
echo "kubectl: $version"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$kubectl" kustomize "$src/deploy/kubernetes" >"$tmp/built.yaml"
fail=0
# One object per manifest the kustomization lists, by kind.
expected=$(sed -n 's/^kind: *//p' "$src"/deploy/kubernetes/*.yaml | grep -vx Kustomization | sort)
built=$(sed -n 's/^kind: *//p' "$tmp/built.yaml" | sort)
if [[ $expected != "$built" ]]; then
  echo "FAIL: kubectl kustomize built kinds [$(echo "$built" | tr '\n' ' ')], the manifests hold [$(echo "$expected" | tr '\n' ' ')]" >&2
  fail=1
fi
echo "kubectl kustomize: $(echo "$built" | wc -l) objects"
/usr/bin/python3 "$src/tests/deploy/kubernetes-schema-check.py" <"$tmp/built.yaml" || fail=1
# The checker itself catches what it is for: a misspelt field and a wrongly typed value.
sed 's/readinessProbe:/readinesProbe:/' "$tmp/built.yaml" >"$tmp/typo.yaml"
if /usr/bin/python3 "$src/tests/deploy/kubernetes-schema-check.py" <"$tmp/typo.yaml" >"$tmp/typo.out"; then
  echo "FAIL: the schema check passed a DaemonSet with 'readinesProbe'" >&2
  fail=1
fi
grep -q 'readinesProbe: no such field in V1Container' "$tmp/typo.out" ||
  { cat "$tmp/typo.out" >&2; echo "FAIL: the misspelt field is not named" >&2; fail=1; }
sed 's/containerPort: 9477/containerPort: "9477"/' "$tmp/built.yaml" >"$tmp/type.yaml"
if /usr/bin/python3 "$src/tests/deploy/kubernetes-schema-check.py" <"$tmp/type.yaml" >/dev/null; then
  echo "FAIL: the schema check passed a string containerPort" >&2
  fail=1
fi
exit "$fail"
