"""Revoked sessions (gateway.core.revocation) and the per-key HTTP rate (gateway.core.ratelimit.KeyedRate)."""

from gateway.core.ratelimit import KeyedRate
from gateway.core.revocation import Revocation, Revocations


def test_revoking_a_user_ends_the_sessions_started_until_then_and_no_later_ones() -> None:
    known = Revocations()
    assert known.add(Revocation(at=100.0, user_id=7))
    assert known.revoked(7, "a", started=99.0) and known.revoked(7, "b", started=100.0)
    assert not known.revoked(7, "c", started=101.0)  # signed in again afterwards
    assert not known.revoked(8, "a", started=99.0)


def test_revoking_a_token_id_ends_that_session_only() -> None:
    known = Revocations()
    assert known.add(Revocation(at=100.0, token_id="abc"))
    assert known.revoked(7, "abc", started=1e12)
    assert not known.revoked(7, "abd", started=0.0)
    assert not known.revoked(7, "", started=0.0)  # tokens from before ids are revoked by user only


def test_only_news_end_live_sessions_and_what_aged_out_is_forgotten() -> None:
    known = Revocations()
    assert known.add(Revocation(at=100.0, user_id=7))
    assert not known.add(Revocation(at=90.0, user_id=7))  # older than what is known: nothing more to end
    stored = [Revocation(at=100.0, user_id=7), Revocation(at=150.0, token_id="t"), Revocation(at=10.0, user_id=9)]
    assert known.merge(stored, forget_before=50.0) == [stored[1], stored[2]]
    assert known.users == {7: 100.0} and known.tokens == {"t": 150.0}


def test_each_key_has_its_own_rate_and_is_told_how_long_to_wait() -> None:
    rate = KeyedRate(rate=2, burst=3)
    assert [rate.wait("u1", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rate.wait("u1", 0.0) == 0.5  # one more token in half a second
    assert rate.wait("u2", 0.0) == 0.0  # another key's bucket is full
    assert rate.wait("u1", 0.5) == 0.0


def test_idle_buckets_are_dropped_so_memory_follows_active_keys() -> None:
    rate = KeyedRate(rate=10, burst=10)
    for key in range(1024):
        rate.wait(key, 0.0)
    rate.wait("late", 0.5)  # the others have not refilled yet: kept
    assert len(rate.buckets) == 1025
    for key in range(1024, 3000):
        rate.wait(key, 5.0)  # by now the first ones have: dropped at the next sweep
    assert len(rate.buckets) < 2100
