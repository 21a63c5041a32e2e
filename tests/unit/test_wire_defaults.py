"""A job's and a group's fields at their default are left out of the wire; every client puts them back.

The browser keeps its own list of those defaults (frontend/js/live.js): it must name every field that can
be left out, with the value the server means by leaving it out.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from gateway.core.grouping import Group
from gateway.core.model import Counts, Job

LIVE_JS = Path(__file__).resolve().parents[2] / "frontend" / "js" / "live.js"


def _browser_defaults(name: str) -> dict[str, object]:
    body = re.search(rf"const {name} = (\{{.*?\}});", LIVE_JS.read_text(), re.S)
    assert body is not None, f"{name} not found in live.js"
    return json.loads(re.sub(r"(\w+):", r'"\1":', body.group(1)))


def _server_defaults(struct: type[msgspec.Struct]) -> dict[str, object]:
    return {f.encode_name: f.default for f in msgspec.structs.fields(struct) if f.default is not msgspec.NODEFAULT}


def test_the_browser_puts_back_every_default_the_server_leaves_out() -> None:
    assert _browser_defaults("JOB_DEFAULTS") == _server_defaults(Job)
    assert _browser_defaults("GROUP_DEFAULTS") == _server_defaults(Group)


def test_a_queued_job_leaves_its_nulls_out_and_decodes_whole() -> None:
    job = Job(
        id=1,
        team_id=2,
        trajectory_id=3,
        cluster_id=4,
        kind="preprocess",
        name="Preprocess frame 7",
        status="queued",
        version=1,
        frame=7,
        created_at=datetime(2026, 11, 30, tzinfo=UTC),
    )
    wire = msgspec.json.encode(job)
    assert b"null" not in wire and b"attempts" not in wire and b'"frame":7' in wire
    assert msgspec.json.decode(wire, type=Job) == job
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(job), type=Job) == job


def test_a_group_always_carries_its_whole_counts() -> None:
    group = Group(key="general", label="General", status="queued", total=1, counts=Counts(queued=1))
    decoded = msgspec.json.decode(msgspec.json.encode(group))
    assert decoded["counts"] == {
        "queued": 1,
        "retrying": 0,
        "running": 0,
        "completed": 0,
        "failed": 0,
        "holding": 0,
        "preempted": 0,
        "silent": 0,
    }
    assert "timestep" not in decoded and "open" not in decoded
