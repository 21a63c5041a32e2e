"""What the client keeps per channel, without a server: where to resume, what to drop, what to ask again
(gateway.client.channels, which GatewayClient feeds every message it reads)."""

from __future__ import annotations

import pytest

from gateway.client import ChannelRefused, Forbidden, GatewayClient
from gateway.client.channels import ClientChannels
from gateway.core.protocol import Batch, Error, Resync, Snapshot

CHANNEL = "team-jobs:7"
NOW = 1000.0  # the event loop's clock, as the client passes it


def subscribed(*channels: str) -> ClientChannels:
    kept = ClientChannels(max_backoff=15.0)
    for channel in channels:
        kept.follow(channel)
    return kept


def page(seq: int, number: int, final: bool) -> Snapshot:
    return Snapshot(channel=CHANNEL, seq=seq, cursor=f"1-{seq}", time=0, page=number, final=final, jobs=[])


def batch(seq: int) -> Batch:
    return Batch(channel=CHANNEL, seq=seq, cursor=f"1-{seq}", jobs=[])


def test_a_paged_snapshot_is_resumed_from_only_once_its_last_page_came() -> None:
    kept = subscribed(CHANNEL)
    assert kept.track(page(10, 0, final=False), NOW)
    assert kept.followed[CHANNEL].cursor is None  # a drop now must bring the whole snapshot again
    assert kept.track(page(10, 1, final=True), NOW)
    assert kept.followed[CHANNEL].cursor == "1-10"


def test_a_message_already_applied_is_dropped_and_a_gap_asks_for_a_fresh_snapshot() -> None:
    kept = subscribed(CHANNEL)
    kept.track(page(10, 0, final=True), NOW)
    assert kept.track(batch(11), NOW) and not kept.track(batch(11), NOW)
    assert not kept.track(batch(13), NOW)
    assert kept.followed[CHANNEL].cursor is None and kept.due_now(NOW) == [(CHANNEL, None)]


def test_resync_is_yielded_and_asks_again_without_a_cursor() -> None:
    kept = subscribed(CHANNEL)
    kept.track(page(10, 0, final=True), NOW)
    assert kept.track(Resync(channel=CHANNEL, reason="slow_consumer"), NOW)
    assert kept.followed[CHANNEL].cursor is None and kept.due_now(NOW) == [(CHANNEL, None)]


def test_after_a_reconnect_every_channel_is_asked_for_from_its_cursor_once() -> None:
    kept = subscribed(CHANNEL, "team-jobs:8")
    kept.track(page(10, 0, final=True), NOW)
    kept.ask_all_again()
    assert kept.due_now(NOW) == [(CHANNEL, "1-10"), ("team-jobs:8", None)]
    kept.asked(CHANNEL)
    kept.asked("team-jobs:8")
    assert kept.due_now(NOW) == [] and kept.until_due(NOW) is None


def test_a_forbidden_channel_is_dropped_recorded_and_raised() -> None:
    kept = subscribed(CHANNEL, "team-jobs:8")
    with pytest.raises(Forbidden) as raised:
        kept.track(
            Error(code="forbidden", message="not a member of the team of team-jobs:8", channel="team-jobs:8"), NOW
        )
    assert raised.value.channel == "team-jobs:8"
    assert list(kept.followed) == [CHANNEL] and list(kept.refused) == ["team-jobs:8"]


def test_an_error_about_a_long_name_cut_by_the_server_still_finds_its_channel() -> None:
    long = "trajectory:" + "1" * 89
    kept = subscribed(long)
    with pytest.raises(ChannelRefused) as raised:
        kept.track(Error(code="bad_channel", message="not a channel", channel=long[:80]), NOW)
    assert raised.value.channel == long and not kept.followed


def test_an_unavailable_channel_is_yielded_and_asked_for_again_after_a_backoff() -> None:
    kept = subscribed(CHANNEL)
    assert kept.track(Error(code="unavailable", message="try again", channel=CHANNEL), NOW)
    first = kept.until_due(NOW)
    assert first is not None and 0.1 < first <= 0.4
    assert kept.due_now(NOW) == [] and kept.due_now(NOW + first) == [(CHANNEL, None)]
    assert kept.followed[CHANNEL].retry_delay == 0.5  # the next one waits longer


async def test_a_name_too_long_for_the_server_is_refused_before_it_is_sent() -> None:
    client = GatewayClient("http://127.0.0.1:1", "token")
    with pytest.raises(ChannelRefused, match="at most 100 characters"):
        await client.subscribe("trajectory:" + "1" * 90)
    assert not client.channels
