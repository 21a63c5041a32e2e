"""A rolling deploy behind HAProxy under the `steady` load: `bench.deploy` at its quick size.

Two gateway nodes behind HAProxy (Debian's package; health checks on /readyz), 300 subscribers over five teams'
channels and trajectory panels connected through it, 200 job changes a second. Each node in turn is SIGTERMed and
started again: it must leave HAProxy's rotation before it closes anybody, close each of its clients with 1012 and
a retry hint of its own, and exit 0; its clients must come back through HAProxy to the other node, resume from
their cursors and be current again, nothing lost or repeated. The figures (times, /healthz latency on the
surviving node) are printed (`pytest -s`), never asserted: `python -m bench deploy` records them.

Without HAProxy (`apt-get install haproxy`) the test is skipped, unless GATEWAY_REQUIRE_HAPROXY=1 (CI installs it
and sets that) makes it a failure.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bench import deploy
from harness.haproxy import installed

SUBSCRIPTIONS = 375  # 300 team channels, and a trajectory panel for every fourth subscriber


@pytest.fixture(scope="module")
async def record() -> AsyncIterator[dict[str, Any]]:
    if installed() is None:
        if os.environ.get("GATEWAY_REQUIRE_HAPROXY") == "1":
            pytest.fail("GATEWAY_REQUIRE_HAPROXY=1 but HAProxy is not installed (Debian: the haproxy package)")
        pytest.skip("HAProxy is not installed: the rolling deploy cannot run")
    with tempfile.TemporaryDirectory(prefix="gateway-deploy-") as workdir:
        yield await deploy.run(Path(workdir), quick=True, progress=print)


@pytest.mark.parametrize("slot", [0, 1])
def test_a_node_restarted_behind_haproxy_loses_nothing_repeats_nothing_and_its_clients_are_current_again(
    record: dict[str, Any], slot: int
) -> None:
    r = record["restarts"][slot]
    shown = str(r)  # whole when an assertion fails (pytest cuts a dict short)
    assert r["node"] == f"node{slot}" and r["exit_code"] == 0, shown
    # Every subscriber ends at the database's state, saw no message twice, and resumed from its cursors: the
    # channels' history covered the restart, so nobody needed a snapshot again.
    assert r["checked"] == SUBSCRIPTIONS and r["lost"] == 0 and r["stale"] == 0, shown
    assert r["duplicates"] == 0 and r["gaps"] == 0 and r["resyncs"] == 0 and r["snapshot_pages"] == 0, shown
    assert r["current_s"] is not None, shown  # a change committed once the node had exited reached everyone
    # The node said it was leaving at once, HAProxy took it out, and only then did it close anybody.
    assert r["readyz_503_s"] is not None and r["readyz_503_s"] < r["lb_down_s"] < r["exit_s"], shown
    # Its clients, and they alone, were closed with 1012, each told a retry hint of its own, and came back.
    clients = r["clients_on_node"]
    assert clients > 0 and r["closes"] == {1012: clients} and r["reconnects"] == clients, shown
    assert r["hints"]["count"] == r["hints"]["distinct"] == clients, shown
    assert r["clients_on_other_after"] + r["clients_on_restarted_after"] == 300, shown  # nobody left out
    assert r["haproxy_503s"] == 0 and r["other_taken_out"] == 0, shown  # the other node served throughout
    # The surviving node answered every /healthz poll meanwhile, and the restarted one went back into rotation.
    assert r["healthz"]["polls"] > 0 and r["healthz"]["failed"] == 0, shown
    assert r["back_in_lb_s"] is not None and r["back_in_lb_s"] > r["exit_s"], shown
    print(deploy.describe(r))
