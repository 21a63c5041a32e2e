"""A connection's pending output: bounded; past the bound a live frame is refused (the connection lags and
catches up from history), and a connection still past it after a resync, before draining once, is closed."""

from gateway.core.outbound import Outbound, Verdict


def test_frames_queue_until_the_bound() -> None:
    out = Outbound(limit=10)
    assert out.push(b"12345") is Verdict.QUEUED
    assert out.push(b"12345") is Verdict.QUEUED
    assert out.size == 10 and len(out) == 2


def test_over_the_bound_a_live_frame_is_refused_and_what_is_pending_stays() -> None:
    out = Outbound(limit=10)
    out.push(b"12345678")
    assert out.push(b"abcdef") is Verdict.LAG
    assert out.size == 8 and len(out) == 1
    assert out.push(b"abcdef") is Verdict.LAG  # lagging again is not a reason to close
    assert [out.pop(), out.pop()] == [b"12345678", None]


def test_past_the_bound_after_a_resync_before_draining_means_close() -> None:
    out = Outbound(limit=10)
    out.resyncing = True  # the connection was told to resync as a slow consumer
    out.push(b"12345678")
    assert out.push(b"abcdef") is Verdict.CLOSE


def test_draining_once_forgives_the_resync() -> None:
    out = Outbound(limit=10)
    out.resyncing = True
    out.push(b"123")
    assert out.pop() == b"123"
    assert out.pop() is None  # drained
    out.push(b"12345678")
    assert out.push(b"abcdef") is Verdict.LAG


def test_an_empty_queue_takes_one_oversize_frame_and_forced_frames_always_go_in() -> None:
    out = Outbound(limit=4)
    assert out.push(b"123456789") is Verdict.QUEUED
    assert out.push(b"resync", force=True) is Verdict.QUEUED
    assert [out.pop(), out.pop(), out.pop()] == [b"123456789", b"resync", None]


def test_frames_are_shared_references_not_copies() -> None:
    frame = b"x" * 100
    a, b = Outbound(1000), Outbound(1000)
    a.push(frame)
    b.push(frame)
    assert a.pop() is b.pop() is frame


def test_forced_frames_do_not_count_against_the_live_bound() -> None:
    out = Outbound(limit=10)
    out.push(b"x" * 100, force=True)  # a snapshot page
    assert out.push(b"12345") is Verdict.QUEUED
    assert out.push(b"12345") is Verdict.QUEUED
    assert out.push(b"1") is Verdict.LAG  # the live frames alone pass the bound
