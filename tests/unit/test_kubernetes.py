"""deploy/kubernetes/: every manifest passes Kubernetes' own schemas (kubernetes-validate, strict: an unknown
field fails), and holds what docs/operations.md ("Kubernetes") says of it: probes on the health port, a grace
period covering the preStop, the drain and the close, non-root pods on a read-only root, a PodDisruptionBudget
over the nodes, two relays, the migration as a Job, and only settings gateway/config.py reads.

The ServiceMonitor is a CRD's (the Prometheus Operator's), which kubernetes-validate has no schema for: its
structure is checked here instead, against the Services, ports and Secret it names."""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from gateway.cli import parser
from gateway.config import Settings
from gateway.web.http.hosts import host_allowed
from tests.kubernetes_manifests import (
    MANIFESTS,
    config,
    container_of,
    environment,
    files,
    one,
    pod_templates,
    resources,
    secret_keys,
)

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "container" / "Containerfile"
CONFIG_SOURCE = ROOT / "gateway" / "config.py"
OLDEST = "1.30.0"  # preStop's sleep action (beta, on by default) and Job's podFailurePolicy are there from 1.30
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
CLOSE_SECONDS = 2  # after the drain, a node waits this long at most for its clients' close frames
POD_IP = "10.244.1.7"  # what the kubelet would put in POD_IP (status.podIP)


def _names_config_reads() -> set[str]:
    """The environment variables gateway/config.py names (every one it reads is a string literal there)."""
    tree = ast.parse(CONFIG_SOURCE.read_text())
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"[A-Z][A-Z0-9_]+", node.value)
    }


def _settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in _names_config_reads():
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


@pytest.mark.parametrize("version", [OLDEST, kubernetes_validate.latest_version()])
def test_every_manifest_passes_kubernetes_schemas(version: str) -> None:
    checked = 0
    for resource in resources():
        if (resource["apiVersion"], resource["kind"]) in CRDS:
            continue
        kubernetes_validate.validate(resource, version, strict=True)
        checked += 1
    assert checked >= 9  # ConfigMap, Secret, Job, two Deployments, Services and PodDisruptionBudgets


def test_the_schemas_turn_away_a_misspelt_field() -> None:
    deployment = copy.deepcopy(one("Deployment", "gateway-node"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, OLDEST, strict=True)


def test_kustomization_applies_every_manifest_but_the_example_secret() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in files() if p.name != "secret.example.yaml"]
    images = {c["image"] for _, pod in pod_templates() for c in pod["spec"]["containers"]}
    assert images == {image["name"] for image in kustomization["images"]} == {"jobs-gateway"}


def test_nodes_are_probed_on_the_health_port() -> None:
    container = container_of("gateway-node")
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["health"] == int(config()["GATEWAY_HEALTH_PORT"]) != ports["http"]
    readiness, liveness = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert (readiness["path"], readiness["port"]) == ("/readyz", "health")
    assert (liveness["path"], liveness["port"]) == ("/healthz", "health")
    assert container["startupProbe"]["httpGet"]["port"] == "health"
    assert container["command"][:2] == ["gateway", "serve"]
    args = parser().parse_args(container["command"][1:])
    assert (args.host, args.port) == ("0.0.0.0", ports["http"])


def test_the_probes_and_scrapes_name_a_host_the_node_answers_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet and Prometheus send Host: <pod IP>:<port>; any name not in GATEWAY_HOSTS gets 421."""
    env = environment(container_of("gateway-node"), POD_IP=POD_IP)
    hosts = _settings(env, monkeypatch).hosts
    assert host_allowed(f"{POD_IP}:{config()['GATEWAY_HEALTH_PORT']}", hosts)
    assert host_allowed("jobs.example.org", hosts)
    assert not host_allowed("evil.example", hosts)


def test_the_grace_period_covers_the_prestop_the_drain_and_the_close() -> None:
    pod = one("Deployment", "gateway-node")["spec"]["template"]["spec"]
    pre_stop = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain = float(config()["GATEWAY_DRAIN_SECONDS"])
    assert pre_stop >= 3 and drain > 0
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + drain + CLOSE_SECONDS + 5


def test_every_pod_runs_as_a_fixed_non_root_user_on_a_read_only_root() -> None:
    (user,) = re.findall(r"^USER (\d+):(\d+)$", CONTAINERFILE.read_text(), re.MULTILINE)
    templates = dict(pod_templates())
    assert set(templates) == {"gateway-node", "gateway-relay", "gateway-migrate"}
    for name, template in templates.items():
        pod = template["spec"]
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True, name
        assert (str(security["runAsUser"]), str(security["runAsGroup"])) == user != ("0", "0"), name
        assert pod["automountServiceAccountToken"] is False, name
        emptied = {volume["name"] for volume in pod["volumes"] if "emptyDir" in volume}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
            mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
            assert mounts["/tmp"] in emptied and set(mounts.values()) <= emptied, name  # the image's HOME
            for kind in ("requests", "limits"):
                assert set(container["resources"][kind]) == {"cpu", "memory"}, name


def test_the_disruption_budgets_select_the_nodes_and_the_relays() -> None:
    for name in ("gateway-node", "gateway-relay"):
        deployment = one("Deployment", name)
        budget = one("PodDisruptionBudget", name)
        assert budget["spec"]["selector"] == deployment["spec"]["selector"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert budget["spec"]["maxUnavailable"] == 1 < deployment["spec"]["replicas"]
    other = one("Deployment", "gateway-relay")["spec"]["template"]["metadata"]["labels"]
    assert not one("PodDisruptionBudget", "gateway-node")["spec"]["selector"]["matchLabels"].items() <= other.items()


def test_two_relays_run_one_serving_and_one_standing_by_with_their_metrics_reachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deployment = one("Deployment", "gateway-relay")
    assert deployment["spec"]["replicas"] == 2
    container = container_of("gateway-relay")
    assert container["command"] == ["gateway", "relay"]
    settings = _settings(environment(container), monkeypatch)
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["metrics"] == settings.relay_metrics_port > 0
    assert settings.relay_metrics_host == "0.0.0.0"  # reachable from Prometheus, which then needs the token


def test_the_migration_job_runs_gateway_migrate_and_stops_on_what_will_not_mend() -> None:
    job = one("Job", "gateway-migrate")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["gateway", "migrate"]
    assert pod["restartPolicy"] == "Never"
    (rule,) = job["spec"]["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == [2, 4]  # gateway.exits USAGE, REFUSED
    assert set(environment(container)) == {"DATABASE_URL"}


def test_every_setting_the_manifests_give_is_one_config_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name the gateway does not read would be a setting that silently does nothing (a typo, a renamed one)."""
    read = _names_config_reads()
    for name, template in pod_templates():
        for container in template["spec"]["containers"]:
            env = environment(container, POD_IP=POD_IP)
            referenced = set(re.findall(r"\$\((\w+)\)", " ".join(e.get("value", "") for e in container.get("env", []))))
            unread = set(env) - read - referenced
            assert not unread, f"{name} sets {sorted(unread)}, which gateway/config.py does not read"
            _settings(env, monkeypatch)  # and reads them without a ConfigError
    assert secret_keys() <= read
    settings = _settings(environment(container_of("gateway-node"), POD_IP=POD_IP), monkeypatch)
    assert settings.drain_seconds == float(config()["GATEWAY_DRAIN_SECONDS"])
    assert settings.health_port == int(config()["GATEWAY_HEALTH_PORT"])
    assert settings.log_format == "json"


def test_the_service_monitors_scrape_named_ports_of_the_services_with_the_metrics_token() -> None:
    monitors = [r for r in resources() if (r["apiVersion"], r["kind"]) in CRDS]
    assert {m["metadata"]["name"] for m in monitors} == {"gateway-node", "gateway-relay"}
    services = [r for r in resources() if r["kind"] == "Service"]
    for monitor in monitors:
        spec = monitor["spec"]
        assert set(spec) == {"selector", "endpoints"}
        (service,) = [s for s in services if spec["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
        container = container_of(monitor["metadata"]["name"])
        target_ports = {p["name"]: p["targetPort"] for p in service["spec"]["ports"]}
        (endpoint,) = spec["endpoints"]
        assert set(endpoint) == {"port", "path", "interval", "authorization"}
        assert target_ports[endpoint["port"]] in {p["name"] for p in container["ports"]}
        assert endpoint["path"] == "/metrics" and re.fullmatch(r"\d+s", endpoint["interval"])
        credentials = endpoint["authorization"]["credentials"]
        assert endpoint["authorization"]["type"] == "Bearer"
        assert credentials == {"name": "gateway-secrets", "key": "GATEWAY_METRICS_TOKEN"}
        assert (
            service["spec"]["selector"]
            == one("Deployment", monitor["metadata"]["name"])["spec"]["selector"]["matchLabels"]
        )
