"""Every scenario of `python -m bench <scenario>`, registered the same way: how it starts its world and measures,
which options it takes, how its results are written and what makes its run fail.

Most scenarios (bench/scenarios/) measure each system in turn in one shared world: a fresh database on the
machine's PostgreSQL (or an embedded one), a private valkey-server, the gateway's relay and node, each peer in
turn. `faults` (bench/faults/) and `deploy` (bench/deploy/) start worlds of their own. A new scenario is its
function and one entry in SCENARIOS; tests/unit/test_bench_apart.py holds every one to the same path.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from . import deploy, faults
from .infra import raise_open_files, start_infra
from .report import write
from .scenarios import Progress, Run, burst, fanout, steady, storm
from .systems import SYSTEMS, Context, ensure_node_peers

RESULTS = Path(__file__).resolve().parent / "results"
SPARE_FDS = 1_000  # a server's descriptors besides its subscribers' sockets (Redis, PostgreSQL, logs, libraries)


@dataclass(frozen=True)
class Options:
    """What the command line asked of a run (each scenario takes the options its entry names)."""

    out: Path = RESULTS  # where the results go (and the shared world's processes' logs)
    quick: bool = False
    systems: list[str] = field(default_factory=list)  # empty: every system the scenario measures
    rounds: int = 1
    sizes: list[int] | None = None
    subscribers: int | None = None
    pin: bool = False  # deploy: the servers on every CPU but the last, the subscribers on that one (bench.pinning)


# Where a run writes its results: (out, scenario, run) -> (what it wrote, the tables to print).
Writer = Callable[[Path, str, Run], tuple[str, str]]


@dataclass(frozen=True)
class Scenario:
    run: Callable[[Options, Progress], Awaitable[Run]]  # starts its world, measures, stops the world
    failure: Callable[[dict[str, Any]], str | None]  # why the run must exit non-zero; None: it showed what it must
    write: Writer
    takes: frozenset[str] = frozenset()  # of "systems", "rounds", "sizes", "subscribers", "pin"


MeasureInSharedWorld = Callable[..., Awaitable[Run]]  # (ctx, pool, redis, quick, only, progress, **options)


def in_shared_world(measure: MeasureInSharedWorld) -> Callable[[Options, Progress], Awaitable[Run]]:
    """`measure` run in the shared world, started for it and stopped after it."""

    async def run(options: Options, say: Progress) -> Run:
        limit = raise_open_files()
        sizes = options.sizes
        if sizes and max(sizes) + SPARE_FDS > limit:  # the server under test holds every subscriber's socket
            raise SystemExit(
                f"bench: {max(sizes):,} subscribers need an open-files limit above {max(sizes) + SPARE_FDS:,}"
            )
        if any(n in ("node-ws", "socket.io") for n in (options.systems or SYSTEMS)):
            ensure_node_peers()
        with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
            say(f"starting PostgreSQL and Redis (open files limit {limit})")
            infra = await start_infra(Path(tmp))
            pool = await asyncpg.create_pool(infra.database_url, min_size=2, max_size=8)
            redis = Redis.from_url(infra.redis_url)
            logdir = options.out / "logs"
            logdir.mkdir(parents=True, exist_ok=True)
            ctx = Context(infra.database_url, infra.redis_url, secrets.token_urlsafe(32), logdir)
            try:
                extra: dict[str, object] = {"rounds": options.rounds} if options.rounds > 1 else {}
                if sizes:
                    extra["sizes"] = sizes
                return await measure(ctx, pool, redis, options.quick, options.systems, say, **extra)
            finally:
                await redis.aclose()
                await pool.close()
                await infra.close()

    return run


async def _faults(options: Options, say: Progress) -> Run:
    """`faults` starts its own world (an embedded PostgreSQL it can restart): see bench/faults/."""
    raise_open_files()
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        return Run(await faults.run(Path(tmp), options.quick, say))


async def _deploy(options: Options, say: Progress) -> Run:
    """`deploy` starts its own world (two nodes behind HAProxy): see bench/deploy/."""
    say(f"open files limit {raise_open_files()}")
    with tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp:
        logs = RESULTS / "logs" / "deploy"  # kept after the run (git ignores bench/results/logs)
        shutil.rmtree(logs, ignore_errors=True)
        record = await deploy.run(Path(tmp), options.quick, say, options.subscribers, logs, options.pin)
        say(f"the processes' logs: {logs}")
    return Run(record)


def _with_ratios(out: Path, name: str, run: Run) -> tuple[str, str]:
    """The shared world's results: the record, every figure as a ratio to the best peer, the plots."""
    write(out, name, run.record, run.tables, run.curves)
    return f"wrote {out / name}.json, .md and .png", "\n".join(run.tables)


def _as_own(markdown: Callable[[dict[str, Any]], str]) -> Writer:
    """The results of a scenario that measures the gateway alone: the record and its own markdown."""

    def write_own(out: Path, name: str, run: Run) -> tuple[str, str]:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(run.record, indent=2) + "\n")
        text = markdown(run.record)
        (out / f"{name}.md").write_text(text)
        return f"wrote {out / name}.json and .md", text

    return write_own


def _gateway_wrong(record: dict[str, Any]) -> str | None:
    wrong = [
        name for name, figures in record["systems"].items() if name.startswith("gateway") and not figures.get("correct")
    ]
    return "the gateway's subscribers did not end at the database's state" if wrong else None


def _fault_not_recovered(record: dict[str, Any]) -> str | None:
    phases = record["phases"]
    if any(p["lost"] or p["stale"] for p in phases) or any(p["recovery_s"] is None for p in phases[:-1]):
        return "a subscriber did not end at the database's state after a fault"
    return None


def _deploy_not_clean(record: dict[str, Any]) -> str | None:
    restarts = record["restarts"]
    if len(restarts) < 2 or any(
        r["lost"] or r["stale"] or r["duplicates"] or r["current_s"] is None or r["exit_code"] for r in restarts
    ):
        return "a rolling deploy lost or repeated something, left a subscriber behind, or a node failed"
    return None


# The scenarios whose CPU figures are read as ratios between systems measure each system several times (--rounds).
_ROUNDS = frozenset({"systems", "rounds"})

SCENARIOS: dict[str, Scenario] = {
    "fanout": Scenario(in_shared_world(fanout), _gateway_wrong, _with_ratios, _ROUNDS | {"sizes"}),
    "storm": Scenario(in_shared_world(storm), _gateway_wrong, _with_ratios, frozenset({"systems", "sizes"})),
    "steady": Scenario(in_shared_world(steady), _gateway_wrong, _with_ratios, _ROUNDS),
    "burst": Scenario(in_shared_world(burst), _gateway_wrong, _with_ratios, _ROUNDS),
    "faults": Scenario(_faults, _fault_not_recovered, _as_own(faults.markdown)),
    "deploy": Scenario(_deploy, _deploy_not_clean, _as_own(deploy.markdown), frozenset({"subscribers", "pin"})),
}


def taking(option: str) -> list[str]:
    """The scenarios that take an option."""
    return [name for name, scenario in SCENARIOS.items() if option in scenario.takes]
