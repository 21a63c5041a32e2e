"""A node run as deploy/kubernetes/node.yaml runs it (its command, the ConfigMap's settings, the Secret's keys,
GATEWAY_HOSTS with the pod's IP) answers the kubelet's probes and Prometheus' scrapes where they come from: on
the health port, naming the pod by its IP. On SIGTERM it leaves /readyz first and exits 0 within the grace
period the kubelet leaves after the preStop.

127.0.0.2 plays the pod's IP: a loopback address that is none of the node's default names. The ports are free
ones (a pod has its own; this machine is shared)."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from gateway.embedded import free_port
from tests.conftest import Process, Stack, spawn
from tests.kubernetes_manifests import config, container_of, environment, one

POD_IP = "127.0.0.2"
READY_WITHIN = 120.0  # a start on a busy machine took over 20 s (harness.world.START_TIMEOUT)


@pytest.fixture
def pod(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Process, int, str]]:
    """The node as the manifest configures it, beside the stack's relay: (its process, its health port, the token)."""
    token = secrets.token_hex(16)
    given = {
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_METRICS_TOKEN": token,
    }
    node = container_of("gateway-node")
    env = environment(node, secrets=given, POD_IP=POD_IP)
    port, health = free_port(), free_port()
    env["GATEWAY_HEALTH_PORT"] = str(health)
    command = node["command"]
    assert command[:2] == ["gateway", "serve"] and command[2::2] == ["--host", "--port"]
    args = ["serve", "--host", POD_IP, "--port", str(port)]  # the manifest's 0.0.0.0 covers the pod's IP
    process = spawn("node-k8s", args, {**_without_gateway_settings(), **env}, tmp_path_factory.mktemp("k8s"), port)
    try:
        yield process, health, token
    finally:
        process.stop()


def _without_gateway_settings() -> dict[str, str]:
    """This environment less any GATEWAY_ setting of the tests' own (CI's GATEWAY_REQUIRE_ ones stay)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_") or k.startswith("GATEWAY_REQUIRE_")}


async def _ready(process: Process, probe: httpx.AsyncClient) -> None:
    deadline, last = time.monotonic() + READY_WITHIN, "nothing yet"
    while time.monotonic() < deadline:
        assert process.proc.poll() is None, process.output()
        try:
            answer = await probe.get("/readyz", timeout=5)
            if answer.status_code == 200:
                return
            last = f"{answer.status_code} {answer.text}"
        except httpx.TransportError as exc:
            last = repr(exc)
        await asyncio.sleep(0.2)
    pytest.fail(f"/readyz not 200 within {READY_WITHIN:g} s as the kubelet asks it (last: {last})\n{process.output()}")


async def test_the_node_answers_probes_and_scrapes_on_its_health_port_and_leaves_within_the_grace_period(
    pod: tuple[Process, int, str],
) -> None:
    process, health, token = pod
    # The kubelet's httpGet and Prometheus send Host: <pod IP>:<port>, as httpx does here.
    async with httpx.AsyncClient(base_url=f"http://{POD_IP}:{health}") as probe:
        await _ready(process, probe)
        assert (await probe.get("/healthz")).status_code == 200
        another_pod = await probe.get("/healthz", headers={"Host": f"10.244.9.9:{health}"})
        assert another_pod.status_code == 421  # the host check stands: only this pod's IP was added

        (endpoint,) = one("ServiceMonitor", "gateway-node")["spec"]["endpoints"]
        assert (await probe.get(endpoint["path"])).status_code == 401
        scrape = await probe.get(endpoint["path"], headers={"Authorization": f"Bearer {token}"})
        assert scrape.status_code == 200 and "gateway_connections" in scrape.text

        public = await probe.get(f"http://{POD_IP}:{process.port}/healthz", headers={"Host": "jobs.example.org"})
        assert public.status_code == 200

        spec = one("Deployment", "gateway-node")["spec"]["template"]["spec"]
        grace = (
            spec["terminationGracePeriodSeconds"] - spec["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
        )
        process.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        while (answer := await probe.get("/readyz", timeout=10)).status_code == 200:
            assert time.monotonic() - signalled < float(config()["GATEWAY_DRAIN_SECONDS"]), "still ready"
            await asyncio.sleep(0.1)
        assert answer.status_code == 503 and "shutting down" in answer.text
    try:
        code = await asyncio.to_thread(process.proc.wait, max(0.0, grace - (time.monotonic() - signalled)))
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {grace} s after SIGTERM: the kubelet would have killed it\n{process.output()}")
    assert code == 0, process.output()
