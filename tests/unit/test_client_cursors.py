"""What the client keeps per channel, without a server: where to resume, what to drop, what to ask again."""

from __future__ import annotations

import pytest

from gateway.client import ChannelRefused, Forbidden, GatewayClient, _Channel
from gateway.core.protocol import Batch, Error, Resync, Snapshot

CHANNEL = "team-jobs:7"


def subscribed(*channels: str) -> GatewayClient:
    client = GatewayClient("http://127.0.0.1:1", "token")
    client.channels.update({c: _Channel() for c in channels})
    return client


def page(seq: int, number: int, final: bool) -> Snapshot:
    return Snapshot(channel=CHANNEL, seq=seq, cursor=f"1-{seq}", time=0, page=number, final=final, jobs=[])


def batch(seq: int) -> Batch:
    return Batch(channel=CHANNEL, seq=seq, cursor=f"1-{seq}", jobs=[])


def test_a_paged_snapshot_is_resumed_from_only_once_its_last_page_came() -> None:
    client = subscribed(CHANNEL)
    assert client._track(page(10, 0, final=False))
    assert client.channels[CHANNEL].cursor is None  # a drop now must bring the whole snapshot again
    assert client._track(page(10, 1, final=True))
    assert client.channels[CHANNEL].cursor == "1-10"


def test_a_message_already_applied_is_dropped_and_a_gap_asks_for_a_fresh_snapshot() -> None:
    client = subscribed(CHANNEL)
    client._track(page(10, 0, final=True))
    assert client._track(batch(11)) and not client._track(batch(11))
    assert not client._track(batch(13))
    assert client.channels[CHANNEL].cursor is None and CHANNEL in client._due


def test_resync_is_yielded_and_asks_again_without_a_cursor() -> None:
    client = subscribed(CHANNEL)
    client._track(page(10, 0, final=True))
    assert client._track(Resync(channel=CHANNEL, reason="slow_consumer"))
    assert client.channels[CHANNEL].cursor is None and CHANNEL in client._due


def test_a_forbidden_channel_is_dropped_recorded_and_raised() -> None:
    client = subscribed(CHANNEL, "team-jobs:8")
    with pytest.raises(Forbidden) as raised:
        client._track(Error(code="forbidden", message="not a member of the team of team-jobs:8", channel="team-jobs:8"))
    assert raised.value.channel == "team-jobs:8"
    assert list(client.channels) == [CHANNEL] and list(client.refused) == ["team-jobs:8"]


def test_an_error_about_a_long_name_cut_by_the_server_still_finds_its_channel() -> None:
    long = "trajectory:" + "1" * 89
    client = subscribed(long)
    with pytest.raises(ChannelRefused) as raised:
        client._track(Error(code="bad_channel", message="not a channel", channel=long[:80]))
    assert raised.value.channel == long and not client.channels


async def test_an_unavailable_channel_is_yielded_and_asked_for_again_after_a_backoff() -> None:
    client = subscribed(CHANNEL)
    assert client._track(Error(code="unavailable", message="try again", channel=CHANNEL))
    first = client._until_due()
    assert first is not None and 0.1 < first <= 0.4
    assert client.channels[CHANNEL].retry_delay == 0.5  # the next one waits longer


async def test_a_name_too_long_for_the_server_is_refused_before_it_is_sent() -> None:
    client = GatewayClient("http://127.0.0.1:1", "token")
    with pytest.raises(ChannelRefused, match="at most 100 characters"):
        await client.subscribe("trajectory:" + "1" * 90)
    assert not client.channels
