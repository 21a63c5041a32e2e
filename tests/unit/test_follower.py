"""The sans-I/O follower alone: positions, resume cursors and verdicts (the vectors cover the message walk)."""

from __future__ import annotations

from gateway.core.follower import Follower, Position, Verdict, channel_named

CH = "trajectory:42"


def following(*channels: str) -> Follower:
    follower = Follower()
    for channel in channels:
        follower.follow(channel)
    return follower


def test_a_new_channel_resumes_without_a_cursor() -> None:
    follower = following(CH)
    assert follower.position(CH) == Position() and follower.resume_cursor(CH) is None
    assert follower.resume_cursor("team:1") is None  # not followed


def test_following_again_keeps_the_position() -> None:
    follower = following(CH)
    follower.snapshot(CH, 5, "1-5", 0, True)
    follower.follow(CH)
    assert follower.resume_cursor(CH) == "1-5"


def test_the_resume_cursor_waits_for_the_last_snapshot_page() -> None:
    follower = following(CH)
    assert follower.snapshot(CH, 5, "1-5", 0, False) is Verdict.PAGE
    assert follower.resume_cursor(CH) is None  # resuming from page 0 would skip pages 1 and on
    assert follower.snapshot(CH, 5, "1-5", 1, True) is Verdict.PAGE
    assert follower.resume_cursor(CH) == "1-5"
    assert follower.message(CH, 6, "1-6") is Verdict.APPLY
    assert follower.resume_cursor(CH) == "1-6"


def test_a_replay_after_a_resume_keeps_the_cursor_moving() -> None:
    follower = following(CH)
    assert follower.message(CH, 41, "1-41") is Verdict.APPLY  # no snapshot: the server replayed the history
    assert follower.resume_cursor(CH) == "1-41"


def test_reload_forgets_the_position() -> None:
    follower = following(CH)
    follower.snapshot(CH, 5, "1-5", 0, False)
    follower.reload(CH)
    assert follower.position(CH) == Position() and follower.resume_cursor(CH) is None
    follower.reload("team:1")  # not followed: nothing to forget


def test_gaps_and_duplicates_leave_the_position() -> None:
    follower = following(CH)
    follower.snapshot(CH, 5, "1-5", 0, True)
    assert follower.message(CH, 9, "1-9") is Verdict.GAP
    assert follower.message(CH, 4, "1-4") is Verdict.DUPLICATE
    assert follower.position(CH) == Position(seq=5, cursor="1-5", ready=True)


def test_accept_takes_a_refused_position() -> None:
    follower = following(CH)
    follower.snapshot(CH, 5, "1-5", 0, True)
    assert follower.message(CH, 9, "1-9") is Verdict.GAP
    follower.accept(CH, 9, "1-9")
    assert follower.message(CH, 10, "1-10") is Verdict.APPLY


def test_accept_page_takes_a_refused_page_and_expects_the_next_after_it() -> None:
    position = Position()
    assert position.snapshot(5, "1-5", 0, False) is Verdict.PAGE
    assert position.snapshot(5, "1-5", 2, False) is Verdict.GAP  # page 1 was lost
    assert position == Position(seq=5, cursor="1-5", next_page=1)
    position.accept_page(5, "1-5", 2, False)
    assert position == Position(seq=5, cursor="1-5", next_page=3) and position.resume_cursor is None
    assert position.snapshot(5, "1-5", 3, True) is Verdict.PAGE
    assert position == Position(seq=5, cursor="1-5", ready=True) and position.resume_cursor == "1-5"


def test_accepting_a_final_page_ends_the_snapshot() -> None:
    position = Position()
    position.accept_page(7, "1-7", 4, True)  # a final page with none before it
    assert position == Position(seq=7, cursor="1-7", ready=True) and position.resume_cursor == "1-7"


def test_channels_are_followed_apart() -> None:
    follower = following(CH, "team:1")
    follower.snapshot(CH, 5, "1-5", 0, True)
    assert follower.message("team:1", 77, "1-77") is Verdict.APPLY
    assert follower.resync(CH) is Verdict.RESYNC
    assert follower.resume_cursor(CH) is None and follower.resume_cursor("team:1") == "1-77"


def test_forget_stops_following() -> None:
    follower = following(CH)
    follower.forget(CH)
    follower.forget(CH)
    assert follower.message(CH, 1, "1-1") is Verdict.UNFOLLOWED and follower.position(CH) is None


def test_an_error_names_its_channel_even_cut_to_80_characters() -> None:
    long = "trajectory:" + "1" * 89
    followed = {CH: Position(), long: Position()}
    assert channel_named(CH, followed) == CH and channel_named(long[:80], followed) == long
    assert channel_named(None, followed) is None and channel_named("team:9", followed) is None
    assert channel_named("x" * 80, followed) is None  # cut, but none of ours
