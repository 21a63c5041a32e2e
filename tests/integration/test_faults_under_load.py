"""The faults of test_nothing_lost.py again, under the `steady` benchmark load rather than a quiet test.

`bench.faults` at its quick size: an embedded PostgreSQL (restarted), a private Valkey (restarted), two gateway
nodes (one SIGKILLed) and two relays (the active one SIGKILLed, then cut off from PostgreSQL), 300 subscribers
over five teams' channels and trajectory panels on both nodes, 500 job changes a second. Each fault is
injected mid-load; after the load stops every subscriber must hold exactly the database's state. Then for 40 s
(four of the nodes' keepalives) under the same load one client reads slowly and another not at all. Between them,
network faults on one link each through its fault proxy (harness/faults.py): node0's link to Redis half-open
(node1 serves on), the active relay's link to Redis half-open, and 200 ms ± 50 ms on node0's link to Redis; each
healed, after which every subscriber must be current again. The figures (time to recover, latency) are printed (`pytest -s`), never
asserted: `python -m bench faults` records them, and every network fault on every link.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bench import faults

SUBSCRIPTIONS = 375  # 300 team channels, and a trajectory panel for every fourth subscriber
# The process faults, without the run's baseline (the load and no fault): every fault's phase runs the same load
# before its fault and is held to all the baseline would be (every subscriber at the database, nothing repeated,
# no gap, no resync) or more, so the baseline only repeated them here. `python -m bench faults` still measures it.
PROCESS = [f for f in faults.FAULTS if f != "none (baseline)"]
NODE_REDIS_HALF_OPEN = faults.NetworkFault("half-open", "node → Redis").name
RELAY_REDIS_HALF_OPEN = faults.NetworkFault("half-open", "relay → Redis").name
NODE_REDIS_LATENCY = faults.NetworkFault("latency", "node → Redis").name
NETWORK = [NODE_REDIS_HALF_OPEN, RELAY_REDIS_HALF_OPEN, NODE_REDIS_LATENCY]
STALL_TEST = "test_a_slow_client_and_a_stalled_one_for_four_keepalives_are_bounded_and_the_others_keep_receiving"


@pytest.fixture(scope="module")
async def record(request: pytest.FixtureRequest) -> AsyncIterator[dict[str, Any]]:
    """The phases the selected tests ask for (`-k Redis` runs that fault alone), in one world. Its record
    (record.json, each phase's findings: which subscriptions held another state than the database, the cursor
    they held and what the bus held) and the processes' logs stay in a directory of their own when a test of
    this module fails or the run breaks; the failure messages name it."""
    # Not under pytest's temporary directory: another pytest session starting meanwhile makes its parent
    # private again (0700), and the embedded PostgreSQL (run as its own user when we are root) could not be
    # stopped for its restart.
    workdir = Path(tempfile.mkdtemp(prefix="gateway-faults-"))
    wanted = {
        item.callspec.params.get("fault", item.name)
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    stall = any(item.name == STALL_TEST for item in request.session.items if item.module is request.module)
    failed_before = request.session.testsfailed
    started = time.monotonic()
    try:
        found = await faults.run(
            workdir,
            quick=True,
            progress=lambda said: print(f"[{time.monotonic() - started:5.0f} s] {said}"),
            network=[n for n in NETWORK if n in wanted],
            process=[f for f in PROCESS if f in wanted],
            stall=stall,
        )
    except BaseException as exc:
        exc.add_note(f"the run's logs are kept in {workdir}")
        raise
    found["kept_in"] = str(workdir)
    (workdir / "record.json").write_text(json.dumps(found, indent=2, default=str) + "\n")
    yield found
    if request.session.testsfailed == failed_before:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"\nthe faults run's record and logs are kept in {workdir}")


def phase(record: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in record["phases"] if p["fault"] == name)


def show(record: dict[str, Any], p: dict[str, Any]) -> str:
    """A phase whole (pytest cuts a dict short), and where the run's record and logs are kept."""
    return f"record and logs kept in {record['kept_in']}: {p}"


@pytest.mark.parametrize("fault", PROCESS)
def test_every_subscriber_ends_at_the_database_after_a_fault_under_load(record: dict[str, Any], fault: str) -> None:
    p = phase(record, fault)
    shown = show(record, p)
    assert p["checked"] == SUBSCRIPTIONS and p["lost"] == 0 and p["stale"] == 0, shown
    assert p["recovery_s"] is not None, shown  # a change committed just after the fault reached every subscriber
    assert p["duplicates"] == 0, shown  # no message seen twice
    if fault in ("Redis restarted", "PostgreSQL restarted"):
        return  # Redis lost the history (or may have missed a publish): gaps and resyncs are allowed, losses are not
    # Nothing lost, nothing repeated: sequences stayed contiguous and nobody needed a snapshot again.
    assert p["gaps"] == 0 and p["resyncs"] == 0 and p["snapshot_pages"] == 0, shown
    if fault.startswith("relay"):
        assert p["relay_after"] != p["relay_before"], shown  # the standby took over
    if fault == "gateway node SIGKILLed":
        # Its clients (half of them) reconnected to the other node and resumed from their cursors.
        assert set(p["closes"]) == {1006} and p["reconnects"] == p["closes"][1006] > 0, shown


@pytest.mark.parametrize("fault", NETWORK)
def test_a_network_fault_under_load_loses_nothing_repeats_nothing_and_every_subscriber_is_current_after_the_heal(
    record: dict[str, Any], fault: str
) -> None:
    p = phase(record, fault)
    shown = show(record, p)
    assert p["checked"] == SUBSCRIPTIONS and p["lost"] == 0 and p["stale"] == 0, shown
    assert p["duplicates"] == 0 and p["gaps"] == 0 and p["resyncs"] == 0, shown  # resumed from cursors
    assert p["recovery_s"] is not None and p["healed_s"] is not None, shown  # a change after each reached everyone
    assert p["node_rss_peak_mb"] < p["node_rss_before_mb"] + 64, shown  # nothing piled up without bound
    if fault == NODE_REDIS_HALF_OPEN:
        # node0 told its clients (1013: try again later) rather than leave them on a silent socket, and node1
        # served on meanwhile: its client held a change committed during the partition.
        assert p["closes"].get(1013, 0) > 0, shown
        assert p["other_node_s"] is not None and p["other_node_s"] < p["duration_s"], shown
    if fault == NODE_REDIS_LATENCY:
        assert p["reconnects"] == 0 and p["recovery_s"] < 5, shown  # slower, never broken


def test_a_slow_client_and_a_stalled_one_for_four_keepalives_are_bounded_and_the_others_keep_receiving(
    record: dict[str, Any],
) -> None:
    p = record["phases"][-1]
    shown = show(record, p)
    assert p["stall_s"] == 4 * faults.KEEPALIVE
    # The node holds at most its bound per stalled connection (plus the heap's noise), far below what the
    # stalled clients were sent: a client reading the same channels received all of it.
    bound_mb = 2 * faults.MAX_PENDING / 2**20 + 16
    assert p["node_rss_max_growth_mb"] < bound_mb < p["reading_client_received_mb"] * 2, shown
    # The slow one (reading 20 messages a second, far behind its channels) lagged: its channels waited for it
    # and it caught up from their history, neither resynced nor closed (its socket kept draining, so the
    # keepalive did not take it for dead). The stalled peer (answering nothing) was closed by the
    # node: it finds its connection gone when it reads again (a close frame it could not read in time: reset).
    assert p["node_catch_ups"] > 0 and p["slow_resyncs"] == 0 and p["slow_close"] is None, shown
    assert p["slow_read_during_stall"] >= 4 * p["stall_s"], shown  # slow, at most 20 a second, but reading all along
    assert (
        p["stalled_close"] in (1006, 1011, 4008) and p["node_connections_after"] == p["node_connections_before"] - 1
    ), shown
    # Both, once reading again (resubscribing or reconnecting with their cursors), hold the database's state.
    assert p["slow_current"] and p["stalled_current"] and p["slow_and_stalled_problems"] == [], shown
    # Meanwhile the others kept receiving: every marker reached every one of them, nobody was resynced or
    # closed, and they end at the database's state.
    assert len(p["others_marker_delays_s"]) >= 5 and None not in p["others_marker_delays_s"], shown
    assert p["others_during_stall"] == {"resyncs": 0, "gaps": 0, "closes": {}}, shown
    assert p["checked"] == SUBSCRIPTIONS and p["lost"] == 0 and p["stale"] == 0, shown
