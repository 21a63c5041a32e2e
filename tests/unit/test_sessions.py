"""Which sessions a node writes, and when: each at most once a minute, however often it is used."""

from gateway.core.sessions import Due, Seen, SeenSessions


def seen(token_id: str, expires: float = 2000.0, device: str = "Chrome on Linux") -> Seen:
    return Seen(token_id, 7, 1000.0, expires, device)


def test_a_session_is_written_once_a_minute_however_many_requests_it_makes() -> None:
    sessions = SeenSessions(every=60.0)
    for t in range(10):
        sessions.seen(seen("a"), 100.0 + t)
    assert sessions.take(110.0) == Due([seen("a")], [])
    for t in range(59):
        sessions.seen(seen("a"), 111.0 + t)
    assert sessions.take(169.0) == Due([], [])
    sessions.seen(seen("a", expires=3000.0), 170.0)
    assert sessions.take(171.0) == Due([seen("a", expires=3000.0)], [])


def test_the_latest_request_before_a_write_wins() -> None:
    sessions = SeenSessions()
    sessions.seen(seen("a", expires=2000.0, device="Firefox on Windows"), 1.0)
    sessions.seen(seen("a", expires=2500.0, device="Chrome on Linux"), 2.0)
    assert sessions.take(3.0).seen == [seen("a", expires=2500.0, device="Chrome on Linux")]


def test_a_token_without_an_id_names_no_session() -> None:
    sessions = SeenSessions()
    assert not sessions.wants("", 1.0)
    sessions.seen(seen(""), 1.0)
    assert sessions.take(2.0) == Due([], [])


def test_open_sockets_move_last_seen_once_a_minute_unless_a_request_records_them() -> None:
    sessions = SeenSessions(every=60.0)
    sessions.seen(seen("a"), 1.0)
    sessions.still_live({"a", "b", ""}, 2.0)  # "a" is recorded anyway; a socket without a token id is skipped
    assert sessions.take(3.0) == Due([seen("a")], ["b"])
    sessions.still_live({"a", "b"}, 30.0)
    assert sessions.take(30.0) == Due([], [])
    sessions.still_live({"a", "b"}, 64.0)
    assert sessions.take(64.0) == Due([], ["a", "b"])


def test_a_failed_write_is_written_when_next_seen() -> None:
    sessions = SeenSessions()
    sessions.seen(seen("a"), 1.0)
    sessions.still_live({"b"}, 1.0)
    due = sessions.take(2.0)
    sessions.failed(due)
    sessions.seen(seen("a"), 3.0)
    sessions.still_live({"b"}, 3.0)
    assert sessions.take(4.0) == due


def test_what_waits_is_bounded_and_what_was_written_is_forgotten_after_a_minute() -> None:
    sessions = SeenSessions(every=60.0, max_pending=3)
    for i in range(10):
        sessions.seen(seen(f"s{i}"), 1.0)
    sessions.still_live({f"l{i}" for i in range(10)}, 1.0)
    due = sessions.take(2.0)
    assert [s.token_id for s in due.seen] == ["s0", "s1", "s2"] and len(due.live) == 3
    assert len(sessions.written) == 6
    sessions.take(62.0)
    assert sessions.written == {}
