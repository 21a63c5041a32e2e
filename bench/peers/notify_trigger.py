"""What feeds broadcaster-pg: the textbook way to stream PostgreSQL changes in Python, a row trigger on `jobs`
calling ``pg_notify(channel, the row as JSON)``.

Every inserted or updated job notifies its trajectory's channel and its team's, ``bench:trajectory:<id>`` and
``bench:team:<id>`` (as the tap publishes them), with the plain peers' message: ``{"channel", "changes": [the
row, nulls left out as the gateway's wire leaves them]}``; the team's message also has the team's ``counts``
per status, counted by a query in the trigger. NOTIFY is transactional: the messages go out at commit, in
commit order. A payload must stay under 8,000 bytes (a job with a long error would not fit).

A team's counts are counted after its transactions commit in turn: the trigger takes a transaction-scoped lock
per team before counting. Without it, two transactions of a team committing together each count without the
other's change, and whichever commits last sends counts that miss one.

The trigger exists only while broadcaster-pg is measured (bench/systems.py installs it when the system starts
and drops it when it stops): every other system's writes do not pay for it.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import asyncpg

LOCK_CLASS = 0x62656E  # "ben": the two-key advisory lock space (the relay's locks use the one-key space)

INSTALL = f"""
create or replace function bench_notify() returns trigger language plpgsql as $$
declare
    job json := json_strip_nulls(row_to_json(new));
    counts json;
begin
    perform pg_notify('bench:trajectory:' || new.trajectory_id,
        json_build_object('channel', 'trajectory:' || new.trajectory_id, 'changes', json_build_array(job))::text);
    perform pg_advisory_xact_lock({LOCK_CLASS}, new.team_id::int);
    select json_object_agg(s.status, coalesce(c.n, 0)) into counts
    from unnest(array['queued', 'retrying', 'running', 'completed', 'failed', 'holding', 'preempted', 'silent'])
         s (status)
    left join (select job_listed_status(status, silent_since) as status, count(*) as n from jobs
               where team_id = new.team_id and removed_at is null group by 1) c using (status);
    perform pg_notify('bench:team:' || new.team_id,
        json_build_object('channel', 'team:' || new.team_id, 'changes', json_build_array(job),
                          'counts', counts)::text);
    return null;
end $$;
drop trigger if exists bench_notify on jobs;
create trigger bench_notify after insert or update on jobs for each row execute function bench_notify();
"""

DROP = "drop trigger if exists bench_notify on jobs; drop function if exists bench_notify();"


def install(database_url: str) -> None:
    _execute(database_url, INSTALL)


def drop(database_url: str) -> None:
    _execute(database_url, DROP)


def _execute(database_url: str, sql: str) -> None:
    """Run `sql` from synchronous code (a system's start and stop), even inside a running event loop."""

    async def run() -> None:
        db = await asyncpg.connect(database_url)
        try:
            await db.execute(sql)
        finally:
            await db.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(run())).result()
