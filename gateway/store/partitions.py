"""Who relays which partition, as PostgreSQL knows it: advisory locks, their connections, the relays alive.

Partition k's active relay holds the advisory lock `LOCK_KEY + k` in the session of a dedicated direct
connection (a pool would release it on reset), with TCP keepalives on both ends so that a dead peer ends the
session, and with it the lock, within seconds. Keepalives prove only that some kernel answers (a proxy or pooler
between answers them itself), so the session must also show activity to live: PostgreSQL ends it once it has
been idle for LOCK_IDLE_LIMIT, and the serving relay proves it far more often (gateway.relay.ownership). Each relay process also keeps one connection named `MEMBER`:
counting them tells the relays how many share the partitions.
"""

from __future__ import annotations

import socket

import asyncpg

LOCK_KEY = 0x72656C6179  # "relay": partition k's lock is LOCK_KEY + k
MEMBER = "gateway-relay"  # the application_name of each relay process's own connection: PostgreSQL counts them
_KEEPALIVE = {"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2", "tcp_keepalives_count": "3"}
LOCK_IDLE_LIMIT = "10s"  # idle_session_timeout of a lock's session (PostgreSQL 14 and later; older ones: none)


async def member_connection(database_url: str) -> asyncpg.Connection:
    """The relay process's own connection: while it lives, the process counts as one of the relays."""
    return await asyncpg.connect(database_url, server_settings={"application_name": MEMBER})


async def count_relays(db: asyncpg.Connection) -> int:
    """How many relay processes are connected to this database (their member connections)."""
    count: int = await db.fetchval(
        "select count(*) from pg_stat_activity where application_name = $1 and datname = current_database()",
        MEMBER,
    )
    return count


async def held_partitions(db: asyncpg.Connection) -> set[int]:
    """The partitions whose lock some session holds (other advisory locks give numbers outside the range)."""
    return {
        r["key"] - LOCK_KEY
        for r in await db.fetch(
            "select (classid::bigint << 32) | objid::bigint as key from pg_locks where locktype = 'advisory'"
            " and objsubid = 1 and granted and database = (select oid from pg_database where datname = current_database())"
        )
    }


async def lock_connection(database_url: str) -> asyncpg.Connection:
    """A dedicated direct connection to hold a partition's lock on, with keepalives on both ends."""
    db = await asyncpg.connect(database_url, server_settings={"application_name": "gateway-relay-lock", **_KEEPALIVE})
    _client_keepalive(db)
    try:
        await db.execute(f"set idle_session_timeout = '{LOCK_IDLE_LIMIT}'")
    except asyncpg.UndefinedObjectError:
        pass  # before PostgreSQL 14: the keepalives alone end a dead holder's session
    return db


async def try_lock(db: asyncpg.Connection, partition: int) -> bool:
    """Take the partition's lock if it is free."""
    return bool(await db.fetchval("select pg_try_advisory_lock($1)", LOCK_KEY + partition))


async def wait_for_lock(db: asyncpg.Connection, partition: int) -> None:
    """Stand by until the partition's lock is ours (its holder's session ends)."""
    await db.execute("select pg_advisory_lock($1)", LOCK_KEY + partition)


async def next_epoch(db: asyncpg.Connection) -> int:
    """A new relay epoch, greater than any taken before: a takeover fences out every older relay with it."""
    epoch: int = await db.fetchval("select nextval('relay_epochs')")
    return epoch


async def ping(db: asyncpg.Connection, timeout: float) -> None:
    """One round trip on the lock's connection: its session, hence the lock, is alive (raises if not)."""
    await db.fetchval("select 1", timeout=timeout)


def _client_keepalive(db: asyncpg.Connection) -> None:
    """Notice a dead peer on the lock connection from our side too."""
    sock = db._transport.get_extra_info("socket") if db._transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 2), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
