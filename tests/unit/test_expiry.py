"""Sessions end with their token: one task closes each connection with 4001 once its token has expired."""

import asyncio

from gateway.hub.connection import CLOSE_EXPIRED, Connection
from gateway.hub.expiry import Expiries


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def connection(expires: float | None = None) -> Connection:
    if expires is None:
        return Connection(user_id=1, fmt="json", max_pending=1 << 16)
    return Connection(user_id=1, fmt="json", max_pending=1 << 16, expires=expires)


def test_a_connection_is_due_once_the_second_its_token_expires_in_has_passed() -> None:
    clock = Clock(100.0)
    expiries = Expiries(clock)
    early, later, same_second = connection(100.2), connection(102.5), connection(100.9)
    for conn in (early, later, same_second):
        expiries.add(conn)
    assert expiries.due() == []
    clock.now = 101.0
    assert set(expiries.due()) == {early, same_second}
    clock.now = 102.9
    assert expiries.due() == []  # 102.5 is due at 103: a session ends at most a second late, never early
    clock.now = 103.0
    assert expiries.due() == [later]
    assert expiries.due() == [] and expiries.buckets == {} and expiries.seconds == []


def test_a_connection_that_ended_first_is_forgotten_and_one_without_expiry_never_counts() -> None:
    clock = Clock(100.0)
    expiries = Expiries(clock)
    gone, stays, forever = connection(100.5), connection(100.5), connection()
    for conn in (gone, stays, forever):
        expiries.add(conn)
    expiries.discard(gone)
    expiries.discard(forever)
    assert expiries.buckets == {101: {stays}}  # nothing of the ended connection is kept
    clock.now = 1e12
    assert expiries.due() == [stays]


async def test_the_task_closes_expired_connections_with_4001_and_leaves_the_others_open() -> None:
    expiries = Expiries()
    expired, valid = connection(1.0), connection(4e9)  # 1970 and 2096
    expiries.add(expired)
    expiries.add(valid)
    task = asyncio.create_task(expiries.run())
    try:
        async with asyncio.timeout(30):
            while expired.close_code is None:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert expired.close_code == CLOSE_EXPIRED and valid.close_code is None
