"""The wire protocol, in both formats: what clients may send, and exact errors for what they may not."""

from datetime import UTC, datetime

import msgspec
import pytest

from gateway.core.grouping import Group
from gateway.core.model import Counts, Job
from gateway.core.protocol import (
    BadMessage,
    Batch,
    Ping,
    Snapshot,
    SnapshotJobs,
    Subscribe,
    Unsubscribe,
    decode_client,
    decode_server,
    encode,
    encode_both,
    make_cursor,
    parse_cursor,
)


def raw(message: dict[str, object], fmt: str) -> bytes:
    return msgspec.json.encode(message) if fmt == "json" else msgspec.msgpack.encode(message)


@pytest.fixture(params=["json", "msgpack"])
def fmt(request: pytest.FixtureRequest) -> str:
    return request.param


def test_client_messages_decode_in_both_formats(fmt: str) -> None:
    assert decode_client(raw({"type": "subscribe", "channel": "team:1", "cursor": "3-9"}, fmt), fmt) == Subscribe(
        "team:1", "3-9"
    )
    assert decode_client(raw({"type": "unsubscribe", "channel": "team:1"}, fmt), fmt) == Unsubscribe("team:1")
    assert decode_client(raw({"type": "ping"}, fmt), fmt) == Ping()


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"type": "explode"}, "Invalid value 'explode' - at `$.type`"),
        ({"channel": "team:1"}, "Object missing required field `type`"),
        ({"type": "subscribe"}, "Object missing required field `channel`"),
        ({"type": "subscribe", "channel": 7}, "Expected `str`, got `int` - at `$.channel`"),
        ({"type": "subscribe", "channel": "team:1", "x": 1}, "Object contains unknown field `x`"),
    ],
)
def test_bad_client_messages_have_exact_errors(fmt: str, message: dict[str, object], error: str) -> None:
    with pytest.raises(BadMessage) as info:
        decode_client(raw(message, fmt), fmt)
    assert str(info.value) == error


def test_malformed_bytes_are_a_bad_message(fmt: str) -> None:
    with pytest.raises(BadMessage, match=f"malformed {fmt}"):
        decode_client(b"\xc1{{", fmt)


def test_a_batch_encodes_once_per_format_and_round_trips() -> None:
    job = Job(
        id=1,
        team_id=2,
        trajectory_id=3,
        cluster_id=4,
        kind="preprocess",
        name="Frame",
        status="running",
        version=7,
        frame=0,
        updated_at=datetime(2026, 11, 29, tzinfo=UTC),
    )
    message = Batch(channel="trajectory:3", seq=12, cursor=make_cursor(5, 12), jobs=[job])
    as_json, as_msgpack = encode_both(message)
    assert as_json == encode(message, "json") and as_msgpack == encode(message, "msgpack")
    assert as_json.startswith(b'{"type":"batch","channel":"trajectory:3","seq":12,"cursor":"5-12"')
    assert decode_server(as_json, "json") == message
    assert decode_server(as_msgpack, "msgpack") == message


@pytest.mark.parametrize("groups", [None, [], "some"])
@pytest.mark.parametrize("jobs", [0, 1, 3])
def test_a_snapshot_page_with_its_jobs_encoded_first_is_the_same_bytes(fmt: str, groups: object, jobs: int) -> None:
    """The node encodes a page's jobs and groups once and puts the bytes into each subscriber's page
    (SnapshotJobs): a client must get exactly what it would from the page encoded whole."""
    listed = [
        Job(id=i, team_id=2, trajectory_id=3, cluster_id=4, kind="analysis", name="Frame ü \"1\"", status="failed",
            version=i, attempts=2, frame=i, timestep=0.1 * i, error="x\ny", started_at=datetime(2026, 12, 8, tzinfo=UTC))
        for i in range(jobs)
    ]  # fmt: skip
    chunk = (
        [
            Group(
                key="frame:1", label="Frame 1", frame=1, timestep=0.5, status="failed", total=1, counts=Counts(failed=1)
            )
        ]
        if groups == "some"
        else groups
    )
    fields = dict(channel="trajectory:3", seq=9, cursor="5-9", time=1765152000000, page=4, final=groups is not None)
    whole = Snapshot(**fields, jobs=listed, groups=chunk)  # type: ignore[arg-type]

    def raw(items: list[Job] | list[Group]) -> msgspec.Raw:
        return msgspec.Raw(msgspec.json.encode(items) if fmt == "json" else msgspec.msgpack.encode(items))

    encoded = SnapshotJobs(**fields, jobs=raw(listed), groups=None if chunk is None else raw(chunk))  # type: ignore[arg-type]
    assert encode(encoded, fmt) == encode(whole, fmt)  # type: ignore[arg-type]
    assert decode_server(encode(whole, fmt), fmt) == whole


def test_cursor_round_trip_and_garbage() -> None:
    assert parse_cursor(make_cursor(3, 41)) == (3, 41)
    for bad in ("", "3", "a-b", "3-", "-3", "3-4-5", "9" * 50 + "-1"):
        assert parse_cursor(bad) is None
