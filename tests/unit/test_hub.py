"""The node's fan-out: shared frames, gaps repaired from history in order, or a resync when they cannot be."""

from __future__ import annotations

import asyncio
import json

from gateway.core import envelope
from gateway.core.protocol import Batch, encode_both, make_cursor
from gateway.core.subscription import GoLive, ReadBacklog, ReadSnapshot, Send, Subscription, WaitDrained
from gateway.core.wsframe import Frame
from gateway.hub.connection import Connection
from gateway.hub.hub import Hub

CHANNEL = "trajectory:1"


def conn(fmt: str = "json") -> Connection:
    c = Connection(user_id=1, fmt=fmt, max_pending=1 << 20)  # type: ignore[arg-type]  # unlinked: frames wait
    c.channels[CHANNEL] = 1
    return c


def message(seq: int, epoch: int = 1) -> tuple[bytes, bytes]:
    return encode_both(Batch(channel=CHANNEL, seq=seq, cursor=make_cursor(epoch, seq), jobs=[]))


def packed(seq: int, epoch: int = 1) -> bytes:
    as_json, as_msgpack = message(seq, epoch)
    return envelope.pack(epoch, seq, as_json, as_msgpack)


def seqs(c: Connection) -> list[object]:
    out = []
    for frame, _ in c.outbound.frames:
        m = json.loads(frame.data)
        out.append(m["seq"] if m["type"] == "batch" else m["type"])
    return out


def test_one_frame_object_goes_to_every_subscriber() -> None:
    hub = Hub()
    a, b = conn(), conn()
    hub.add(a, CHANNEL)
    hub.add(b, CHANNEL)
    hub.on_message(CHANNEL, packed(1))
    assert a.outbound.frames[0][0] is b.outbound.frames[0][0]


class SocketLink:
    """A link the hub writes straight to (`fast`), recording the bytes, like the node's own websocket link."""

    writable = True

    def __init__(self, deflate: int = 0) -> None:
        self.deflate = deflate
        self.written: list[bytes] = []
        self.write_wire = self.written.append

    def write(self, frame: Frame) -> None:
        self.written.append(frame.wire_for(self.deflate))

    def wake(self) -> None:
        pass

    def close(self, code: int, reason: str) -> None:
        pass

    def ping(self, wire: bytes, token: bytes) -> None:
        pass


def linked(fmt: str = "json", deflate: int = 0) -> tuple[Connection, SocketLink]:
    link = SocketLink(deflate)
    c = Connection(user_id=1, fmt=fmt, max_pending=1 << 20, link=link)  # type: ignore[arg-type]
    c.refresh()
    return c, link


def test_compressing_subscribers_share_one_deflated_frame_beside_the_plain_one() -> None:
    hub = Hub()
    batch = Batch(channel=CHANNEL, seq=1, cursor=make_cursor(1, 1), jobs=[])
    as_json, as_msgpack = encode_both(batch)
    as_json = as_json[:-1] + b',"pad":"' + b"x" * 1000 + b'"}'  # big enough to be worth compressing
    plain, deflating, deflating_too, small_window, msgpack_deflating = (
        linked(),
        linked(deflate=15),
        linked(deflate=15),
        linked(deflate=10),
        linked("msgpack", 15),
    )
    for c, _ in (plain, deflating, deflating_too, small_window, msgpack_deflating):
        hub.add(c, CHANNEL)
    hub.on_message(CHANNEL, envelope.pack(1, 1, as_json, as_msgpack))
    [p], [d1], [d2], [w], [m] = (
        link.written for _, link in (plain, deflating, deflating_too, small_window, msgpack_deflating)
    )
    assert p == Frame(as_json, text=True).wire and d1[0] == 0xC1 and d1 is d2 and len(d1) < len(p) / 4
    assert w is not d1 and w[0] == 0xC1  # deflated again for its window (here to the same bytes)
    assert m == Frame(as_msgpack, text=False).wire  # under the threshold: uncompressed, RSV1 clear
    assert hub.frames_direct == 5 and hub.bytes_direct == 4 * len(as_json) + len(as_msgpack)


def test_msgpack_subscribers_get_the_relays_msgpack_bytes() -> None:
    hub = Hub()
    c = conn("msgpack")
    hub.add(c, CHANNEL)
    hub.on_message(CHANNEL, packed(1))
    assert c.outbound.frames[0][0].data == message(1)[1]


def test_duplicates_and_older_epochs_are_dropped() -> None:
    hub = Hub()
    c = conn()
    hub.add(c, CHANNEL)
    for data in (packed(5, epoch=2), packed(5, epoch=2), packed(6, epoch=1), packed(6, epoch=2)):
        hub.on_message(CHANNEL, data)
    assert seqs(c) == [5, 6]


def test_a_gap_is_filled_from_history_before_what_came_after_it() -> None:
    asked: list[tuple[str, int, int]] = []
    hub = Hub(on_gap=lambda ch, first, last: asked.append((ch, first, last)))
    c = conn()
    hub.add(c, CHANNEL)
    hub.on_message(CHANNEL, packed(1))
    hub.on_message(CHANNEL, packed(4))  # 2 and 3 were lost
    hub.on_message(CHANNEL, packed(5))  # waits behind the repair
    assert asked == [(CHANNEL, 2, 3)]
    assert seqs(c) == [1]
    hub.repaired(CHANNEL, [(1, 2, message(2)[1]), (1, 3, message(3)[1])])
    assert seqs(c) == [1, 2, 3, 4, 5]


def test_a_channel_never_published_is_anchored_at_0_so_a_lost_first_message_is_a_gap() -> None:
    """A subscriber's snapshot of a channel with no message yet reflects seq 0 (the node anchors the stream at
    (fence, 0)): the first message lost on the bus must be fetched, not skipped by taking the second as the
    stream's start (the client, at 0, would see 2 after its snapshot)."""
    asked: list[tuple[str, int, int]] = []
    hub = Hub(on_gap=lambda ch, first, last: asked.append((ch, first, last)))
    c = conn()
    hub.add(c, CHANNEL)
    hub.anchor(CHANNEL, 1, 0)
    hub.on_message(CHANNEL, packed(2))  # 1 was lost
    assert asked == [(CHANNEL, 1, 1)]  # 2 waits behind the repair
    hub.repaired(CHANNEL, [(1, 1, message(1)[1])])
    assert seqs(c) == [1, 2]


def test_a_gap_history_cannot_fill_resyncs_the_subscribers() -> None:
    hub = Hub(on_gap=lambda *_: None)
    c = conn()
    hub.add(c, CHANNEL)
    hub.on_message(CHANNEL, packed(1))
    hub.on_message(CHANNEL, packed(9))
    hub.repaired(CHANNEL, None)
    assert seqs(c) == [1, "resync"]
    assert CHANNEL not in c.channels and CHANNEL not in hub.subscribers


def test_a_gap_the_history_could_not_answer_for_goes_on_when_the_late_messages_follow_on() -> None:
    """A slow link: the position check saw the bus ahead and asked the history, which timed out; meanwhile the
    link delivered the messages themselves. They follow on from what was delivered: no resync."""
    hub = Hub(on_gap=lambda *_: None)
    c = conn()
    hub.add(c, CHANNEL)
    hub.on_message(CHANNEL, packed(1))
    hub.check_position(CHANNEL, 1, 3)  # the bus is at 3: 2..3 asked of the history
    hub.on_message(CHANNEL, packed(2))  # ...and arrive late, while the read is under way
    hub.on_message(CHANNEL, packed(3))
    hub.repaired(CHANNEL, None)  # the history read failed
    hub.on_message(CHANNEL, packed(4))
    assert seqs(c) == [1, 2, 3, 4] and hub.resyncs == 0


def test_a_node_behind_the_bus_position_fetches_the_rest() -> None:
    asked: list[tuple[str, int, int]] = []
    hub = Hub(on_gap=lambda ch, first, last: asked.append((ch, first, last)))
    c = conn()
    hub.add(c, CHANNEL)
    hub.on_message(CHANNEL, packed(1))
    hub.check_position(CHANNEL, 1, 1)  # up to date: nothing to do
    hub.check_position(CHANNEL, 1, 3)  # the tail was dropped by pub/sub
    assert asked == [(CHANNEL, 2, 3)]
    hub.repaired(CHANNEL, [(1, 2, message(2)[1]), (1, 3, message(3)[1])])
    hub.on_message(CHANNEL, packed(3))  # arriving late after all: a duplicate now
    assert seqs(c) == [1, 2, 3]


async def test_frames_held_behind_a_snapshot_stay_within_the_bound_and_release_says_where_history_takes_over() -> None:
    c = Connection(user_id=1, fmt="json", max_pending=4096)  # type: ignore[arg-type]
    sub = c.open(CHANNEL, team_id=1)
    sub.subscribed(None)
    assert sub.actions() == [ReadSnapshot()]
    for seq in range(1, 41):  # 40 frames of 200 bytes: twice the bound
        c.deliver(CHANNEL, seq, Frame(b"x" * 200, text=True))
    held = c.held[CHANNEL]
    assert held.held_bytes <= 4096 and held.skipped > 20
    assert [s for s, _ in held.held] == list(range(held.skipped + 1, 41))
    # The snapshot was at seq 5: 6..skipped are gone from the buffer, so the release asks the history for those.
    sub.snapshot_read(5)
    assert sub.actions() == [ReadBacklog(6, held.skipped)]
    # Once the history sent them, the rest goes out from the buffer (as the client reads) and the channel is live.
    history = [Frame(b"h" * 200, text=True) for _ in range(6, held.skipped + 1)]
    sub.backlog_read(history)
    sent: list[Frame] = []

    async def client_reads() -> None:
        while True:
            while (frame := c.take()) is not None:
                sent.append(frame)
            await asyncio.sleep(0)

    reading = asyncio.create_task(client_reads())
    try:
        await run(c, sub)
        await asyncio.sleep(0)
    finally:
        reading.cancel()
    assert CHANNEL not in c.held and c.fast is None  # live (unlinked: nothing to write straight to)
    assert sent[: len(history)] == history and len(sent) - len(history) == 40 - held.skipped


def test_a_subscriber_that_goes_live_while_the_stream_is_behind_its_snapshot_gets_nothing_twice() -> None:
    """The node's stream of a channel is being filled from the history (after a Redis restart, the bus is ahead
    of it) when a second client's snapshot is read at the bus's newer position. That client goes live before the
    repair delivers what its snapshot holds already: those messages are dropped for it, the next ones go straight
    out, and the connection takes the hub's shortcut again."""
    asked: list[tuple[str, int, int]] = []
    hub = Hub(on_gap=lambda ch, first, last: asked.append((ch, first, last)))
    first, _ = linked()
    hub.add(first, CHANNEL)
    hub.on_message(CHANNEL, packed(1))
    hub.check_position(CHANNEL, 1, 4)  # the bus is at 4: 2..4 asked of the history
    assert asked == [(CHANNEL, 2, 4)]

    late, link = linked()
    sub = late.open(CHANNEL, team_id=1)
    hub.add(late, CHANNEL)
    sub.subscribed(None)
    assert sub.actions() == [ReadSnapshot()]
    sub.snapshot_page(Frame(b'{"type":"snapshot","seq":4}', text=True))
    sub.snapshot_read(4)  # the snapshot reflects 4, the stream has delivered 1
    for action in sub.actions():
        if isinstance(action, Send):
            late.push(action.payload, force=True)
    sub.drained(hub.delivered_seq(CHANNEL))
    assert sub.actions() == [GoLive()]
    late.go_live(sub)

    hub.repaired(CHANNEL, [(1, seq, message(seq)[1]) for seq in (2, 3, 4)])
    hub.on_message(CHANNEL, packed(5))
    hub.on_message(CHANNEL, packed(6))
    got = [json.loads(w[2:])["seq"] for w in link.written]  # short text frames: a 2-byte header
    assert got == [4, 5, 6]  # the snapshot, then only what came after it
    assert CHANNEL not in late.held and late.fast is not None  # settled: straight to the socket again


async def run(c: Connection, sub: Subscription[Frame]) -> None:
    """Do what the subscription asks that needs no read: what gateway.hub.subscription_runner does."""
    while actions := sub.actions():
        for action in actions:
            if isinstance(action, Send):
                await c.send_paced(action.payload)
            elif isinstance(action, WaitDrained):
                await c.drain()
                sub.drained()
            else:
                assert action == GoLive()
                c.go_live(sub)


def test_a_client_past_the_bound_keeps_what_is_pending_and_its_channel_waits_for_the_history() -> None:
    c = Connection(user_id=1, fmt="json", max_pending=4096)  # type: ignore[arg-type]  # unlinked: it reads nothing
    c.channels[CHANNEL] = 1
    lagged: list[tuple[str, int]] = []
    c.on_lag = lambda _conn, sub: lagged.append((sub.channel, sub.sent))
    for seq in range(1, 61):  # 60 frames of 200 bytes: three times the bound
        c.deliver(CHANNEL, seq, Frame(b"x" * 200, text=True))
    # The first 20 fit and stay pending; the 21st did not: the client has 1..20, the history brings the rest.
    assert len(c.outbound) == 20 and lagged == [(CHANNEL, 20)]
    held = c.held[CHANNEL]
    assert held.skipped >= 21 and held.held_bytes <= 4096 and c.close_code is None
    assert [s for s, _ in held.held] == list(range(held.skipped + 1, 61))


def test_frames_held_for_many_channels_stay_within_one_bound() -> None:
    c = Connection(user_id=1, fmt="json", max_pending=4096)  # type: ignore[arg-type]
    names = [f"trajectory:{i}" for i in range(1, 11)]
    for name in names:
        c.open(name, team_id=1)
    for seq in range(1, 41):  # 10 channels x 40 frames of 200 bytes: twenty times the bound
        for name in names:
            c.deliver(name, seq, Frame(b"x" * 200, text=True))
            assert sum(h.held_bytes for h in c.held.values()) <= 4096
    assert all(c.held[name].skipped > 0 for name in names)  # each will take the rest from its history
