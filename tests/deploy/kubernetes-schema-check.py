#!/usr/bin/python3
"""Checks Kubernetes objects (a multi-document YAML stream on stdin, as `kubectl kustomize`
prints it) against the API's schema as Debian 12's python3-kubernetes (22.6, the Kubernetes 1.22
API) holds it: the models generated from the API's OpenAPI specification, with each field's name
(JSON spelling) and type, and which fields are required.

For each object of a built-in kind: every field is one the schema knows (a misspelt or misplaced
key fails), every value has the field's type (string, integer, boolean, list, map, object), and
every required field is there (the client's models refuse None for them). Custom resources
(ServiceMonitor, PrometheusRule: prometheus-operator's CRDs) have no schema here: they are listed
as not checked, and tests/deploy/kubernetes_manifests_test.cpp checks what kpathd relies on in
them. Exit 0 when every built-in object passes, 1 otherwise (each error printed), 2 on bad input.
"""
import json
import re
import sys

import yaml

try:
    import kubernetes.client as k8s
    from kubernetes.client import ApiClient
except ImportError as e:  # the test dependency is missing: a failure, not a skip
    print(f"python3-kubernetes is not installed ({e}): scripts/install-deps.sh --test", file=sys.stderr)
    sys.exit(2)

PRIMITIVES = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "float": (int, float),
    "datetime": (str,),
    "date": (str,),
}


def model_class(api_version, kind):
    """V1DaemonSet for apps/v1 DaemonSet; None when the client has no such model (a CRD)."""
    version = api_version.split("/")[-1]
    return getattr(k8s, version[0].upper() + version[1:] + kind, None)


def check(value, type_name, path, errors):
    if type_name == "object":  # int-or-string, free-form (RawExtension)
        return
    m = re.fullmatch(r"list\[(.+)\]|dict\(str, (.+)\)", type_name)
    if m:
        is_list = m.group(1) is not None
        if not isinstance(value, list if is_list else dict):
            errors.append(f"{path}: a {'list' if is_list else 'map'} expected, got {type(value).__name__}")
            return
        for key, item in enumerate(value) if is_list else value.items():
            check(item, m.group(1) or m.group(2), f"{path}[{key}]" if is_list else f"{path}.{key}",
                  errors)
        return
    if type_name in PRIMITIVES:
        ok = isinstance(value, PRIMITIVES[type_name])
        if type_name != "bool" and isinstance(value, bool):
            ok = False
        if not ok:
            errors.append(f"{path}: {type_name} expected, got {type(value).__name__} {value!r}")
        return
    cls = getattr(k8s, type_name, None)
    if cls is None:
        errors.append(f"{path}: unknown type {type_name} in the client's schema")
        return
    if not isinstance(value, dict):
        errors.append(f"{path}: a {type_name} object expected, got {type(value).__name__}")
        return
    fields = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    for key, v in value.items():
        if key not in fields:
            errors.append(f"{path}.{key}: no such field in {type_name}")
            continue
        check(v, cls.openapi_types[fields[key]], f"{path}.{key}", errors)


class _Response:
    def __init__(self, obj):
        self.data = json.dumps(obj)


def main():
    try:
        docs = [d for d in yaml.safe_load_all(sys.stdin) if d is not None]
    except yaml.YAMLError as e:
        print(f"not YAML: {e}", file=sys.stderr)
        return 2
    if not docs:
        print("no objects on stdin", file=sys.stderr)
        return 2
    failed = False
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        cls = model_class(doc.get("apiVersion", ""), doc.get("kind", ""))
        if cls is None:
            print(f"not checked: {name} ({doc.get('apiVersion')}: no schema in python3-kubernetes)")
            continue
        errors = []
        check(doc, cls.__name__, name, errors)
        # Required fields: the models refuse None for them while being built.
        try:
            ApiClient().deserialize(_Response(doc), cls.__name__)
        except ValueError as e:
            errors.append(f"{name}: {e}")
        if errors:
            failed = True
            for e in errors:
                print(f"FAIL: {e}")
        else:
            print(f"ok: {name} ({cls.__name__})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
