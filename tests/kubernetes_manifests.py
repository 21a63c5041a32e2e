"""deploy/kubernetes/'s manifests as the tests read them: each resource, a Deployment's container, and a
container's environment as the kubelet would make it (tests/unit/test_kubernetes.py checks the manifests,
tests/integration/test_kubernetes_node.py runs a node as they configure it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

MANIFESTS = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"

Resource = dict[str, Any]


def files() -> list[Path]:
    """Every manifest (kustomization.yaml is kustomize's, not a resource)."""
    return sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def resources() -> list[Resource]:
    return [doc for path in files() for doc in yaml.safe_load_all(path.read_text()) if doc]


def one(kind: str, name: str) -> Resource:
    (found,) = [r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


def pod_templates() -> Iterator[tuple[str, Resource]]:
    for resource in resources():
        if resource["kind"] in ("Deployment", "Job"):
            yield resource["metadata"]["name"], resource["spec"]["template"]


def container_of(deployment: str) -> Resource:
    (found,) = one("Deployment", deployment)["spec"]["template"]["spec"]["containers"]
    return found


def config() -> dict[str, str]:
    return dict(one("ConfigMap", "gateway-config")["data"])


def secret_keys() -> set[str]:
    return set(one("Secret", "gateway-secrets")["stringData"])


def environment(of: Resource, secrets: dict[str, str] | None = None, **downward: str) -> dict[str, str]:
    """A container's environment as the kubelet makes it: envFrom first, then env in order, each $(NAME)
    expanded from what came before. A secret's key stands for itself unless `secrets` gives its value; the
    downward API's values are `downward`."""
    given = secrets or {}
    env: dict[str, str] = {}
    for source in of.get("envFrom", []):
        if "configMapRef" in source:
            assert source["configMapRef"]["name"] == "gateway-config"
            env.update(config())
        else:
            assert source["secretRef"]["name"] == "gateway-secrets"
            env.update({key: given.get(key, f"<{key}>") for key in secret_keys()})
    for entry in of.get("env", []):
        name = entry["name"]
        if "value" in entry:
            env[name] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), entry["value"])
        elif "secretKeyRef" in entry["valueFrom"]:
            key = entry["valueFrom"]["secretKeyRef"]["key"]
            assert key in secret_keys()
            env[name] = given.get(key, f"<{key}>")
        else:
            env[name] = downward[name]
    return env
