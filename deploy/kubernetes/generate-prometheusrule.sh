#!/bin/sh
# Writes the PrometheusRule (prometheus-operator) holding kpathd's rules to stdout, from the one
# rules file that Prometheus, the Debian package and the unit tests use:
#
#   deploy/kubernetes/generate-prometheusrule.sh > deploy/kubernetes/prometheusrule.yaml
#
# A test (ctest -L rules) fails when prometheusrule.yaml is not what this prints.
# Usage: generate-prometheusrule.sh [RULES_FILE]
set -eu
rules=${1:-$(dirname "$0")/../prometheus/kpathd-rules.yml}
cat <<'HEADER'
# GENERATED from deploy/prometheus/kpathd-rules.yml by deploy/kubernetes/generate-prometheusrule.sh:
# edit the rules file and regenerate, never this file.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kpathd
  namespace: kpathd
  labels:
    app.kubernetes.io/name: kpathd
    app.kubernetes.io/component: alert-rules
    # What kube-prometheus-stack's ruleSelector matches (release: <its Helm release name>), as on
    # servicemonitor.yaml: set both to your release's name (deploy/README.md, "One scrape path").
    release: kube-prometheus-stack
spec:
HEADER
# The rules file's groups: block, indented under spec:.
sed -n '/^groups:/,$p' "$rules" | sed 's/^\(.\)/  \1/'
