"""gateway.web.node.garbage's memory policy, and the cycle a connection's link must not leave to the collector."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from gateway.hub.connection import Connection
from gateway.web.node.garbage import RETURN_DROP, THAW_EVERY, CollectorPauses, MemoryReturn, malloc_trim


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counting frees anything meanwhile."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class SocketLink:
    """A link as the node's own holds its connection (gateway.web.websocket.direct.DirectLink.conn)."""

    writable = False
    write_wire = None
    deflate = 0

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def close(self, code: int, reason: str) -> None:
        pass


def test_an_unlinked_connection_and_its_link_are_freed_without_the_collector(no_collector: None) -> None:
    conn = Connection(1, "json", 1 << 20)
    link = SocketLink(conn)
    conn.link = link
    gone = weakref.ref(link)
    del link
    conn.unlink()  # the session's end() does this once the socket is gone
    del conn
    assert gone() is None


def test_a_linked_connection_waits_for_the_collector(no_collector: None) -> None:
    """Why unlink() exists: without it the pair is a cycle, left to a full pass of the collector."""
    conn = Connection(1, "json", 1 << 20)
    conn.link = SocketLink(conn)
    gone = weakref.ref(conn.link)
    del conn
    assert gone() is not None
    gc.collect()
    assert gone() is None


def test_memory_goes_back_once_many_connections_left() -> None:
    trims: list[int] = []
    memory = MemoryReturn(trim=lambda: trims.append(1))
    for count in (0, 400, 1_000, 900, 800):  # a quarter of the peak (250) or RETURN_DROP, whichever is more
        assert not memory.observe(count)
    assert memory.observe(1_000 - RETURN_DROP)
    assert trims == [1] and memory.returns == 1
    assert not memory.observe(1_000 - RETURN_DROP - 10)  # counted from there on
    assert memory.observe(0)
    assert memory.returns == 2


def test_a_crowd_that_came_and_went_between_two_looks_counts() -> None:
    # On a fast machine 1,000 clients connected, followed their channels and left within one look (CI,
    # 2026-12-07): the count was 0 at both looks, and nothing was given back.
    memory = MemoryReturn(trim=lambda: None)
    assert not memory.observe(0, held=0)
    assert memory.observe(0, held=1_000)
    assert memory.returns == 1


def test_a_few_leaving_of_many_is_no_reason() -> None:
    memory = MemoryReturn(trim=lambda: None)
    memory.observe(16_000)
    assert not memory.observe(16_000 - 3_000)  # less than a quarter
    assert memory.observe(16_000 - 4_000)


def test_glibc_hands_its_trim_to_the_node() -> None:
    trim = malloc_trim()
    assert trim is not None  # this machine's C library is glibc
    trim()


class Cyclic:
    """An object the collector alone can free: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def pauses() -> Iterator[CollectorPauses]:
    """A node's collector policy on this process's collector, put back as it was afterwards. Only the tests' own
    passes run meanwhile (a full pass of the process's own, between a thaw and a look, ends the thaw)."""
    thresholds = gc.get_threshold()
    pauses = CollectorPauses()
    pauses.start()
    gc.disable()
    try:
        yield pauses
    finally:
        gc.enable()
        pauses.stop()
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_what_outlived_the_younger_passes_is_frozen_until_the_thaw(pauses: CollectorPauses) -> None:
    """A full pass walks what was frozen no more; a cycle among it is freed once the thaw lets the next one walk it."""
    kept = Cyclic()
    gone = weakref.ref(kept)
    gc.collect(1)  # a pass of generation 1: `kept` outlived it
    assert pauses.promoted
    frozen = gc.get_freeze_count()
    pauses.settle(pauses.thawed + 1)
    assert gc.get_freeze_count() > frozen and not pauses.promoted
    del kept
    gc.collect()
    assert gone() is not None  # frozen: no pass looks at it
    pauses.promoted = False  # then a quiet second, ten minutes on
    pauses.settle(pauses.thawed + THAW_EVERY + 1)
    assert gc.get_freeze_count() == 0 and pauses.thawing
    pauses.settle(pauses.thawed + 1)
    assert gc.get_freeze_count() == 0  # nothing is frozen again before a full pass has walked it all
    gc.collect()
    assert gone() is None and not pauses.thawing


def test_nothing_is_frozen_in_a_second_without_a_pass_that_moved_survivors_on(pauses: CollectorPauses) -> None:
    pauses.promoted = False
    frozen = gc.get_freeze_count()
    young = Cyclic()
    pauses.settle(pauses.thawed + 1)
    assert gc.get_freeze_count() <= frozen  # (frozen objects still go when their last reference does)
    del young


def test_a_storm_puts_the_thaw_off_until_a_quiet_second_or_ten_minutes_more(pauses: CollectorPauses) -> None:
    pauses.promoted = True  # passes of generation 1 in the last second: a storm
    pauses.settle(pauses.thawed + THAW_EVERY + 1)
    assert gc.get_freeze_count() > 0 and not pauses.thawing  # frozen again, not thawed
    pauses.promoted = True
    pauses.settle(pauses.thawed + 2 * THAW_EVERY + 1)
    assert pauses.thawing and gc.get_freeze_count() == 0
