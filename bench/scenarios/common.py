"""What every scenario shares: its run's record, tables and curves, the median round, the closing figures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from gateway.bus import history, keys

from ..measure import Outcome
from ..report import markdown, ratios
from ..systems import DB_FED, PEER_NAMES

Progress = Callable[[str], None]


@dataclass
class Run:
    record: dict[str, Any]
    tables: list[str] = field(default_factory=list)
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def turns(names: list[str], rounds: int) -> list[tuple[int, str]]:
    """(round, system): every system once a round, in `names`' order, round after round. The systems take turns,
    so a machine that slows down for a while moves every system's figures, not one system's."""
    return [(turn, name) for turn in range(rounds) for name in names]


def median_round(outcomes: list[Outcome], key: str) -> Outcome:
    """Of one system's rounds, the one whose `key` is the median (lower median for an even count), whole, so
    its figures agree with each other; with every round's `key`, and correct only if every round was. The
    rounds take turns with the other systems', so a machine that slows down for a while moves every system's
    figures, not one system's."""
    if len(outcomes) == 1:
        return outcomes[0]
    ordered = sorted(outcomes, key=lambda o: o.figures.get(key) or float("inf"))
    median = ordered[(len(ordered) - 1) // 2]
    figures = dict(median.figures)
    last = outcomes[-1].figures
    figures.update({k: v for k, v in last.items() if k.startswith("saturation")})  # measured in the last round only
    figures[f"{key}_rounds"] = [o.figures.get(key) for o in outcomes]
    figures["lost"] = max(o.figures["lost"] for o in outcomes)
    figures["stale"] = max(o.figures["stale"] for o in outcomes)
    figures["correct"] = all(o.figures["correct"] for o in outcomes)
    return Outcome(figures, median.curve)


def finish(run: Run, systems: dict[str, dict[str, Any]], title: str, lines: list[str] | None = None) -> Run:
    """A single-size scenario's record and table: every system's figures, and their ratios to the best peer."""
    peers = [n for n in [*PEER_NAMES, *DB_FED] if n in systems]
    run.record["systems"] = systems
    run.record["ratios"] = ratios(systems, peers)
    run.tables.append(markdown(title, systems, peers, lines))
    return run


def count_pairs(figures: dict[str, Any], delivered: float) -> None:
    """Count a delivered delta as one committed change brought to one subscriber that follows it (a batch or
    summary that reflects many changes brings many): the same unit for coalescing and forwarding systems."""
    if figures["deltas"]:
        figures["deltas_per_s"] = round(figures["deltas_per_s"] * delivered / figures["deltas"], 1)
    figures["deltas"] = int(delivered)
    figures["cpu_us_per_delta"] = round(figures["cpu_s"] * 1e6 / delivered, 3) if delivered else None
    figures["coalescing"] = round(delivered / figures["frames"], 1) if figures["frames"] else None


async def published(redis: Redis, channel: str, team_id: int) -> int:
    """How many messages the relay has published on a channel (its position's seq)."""
    position = await history.position(redis, keys.Partitions().tag(team_id), channel)
    return position[1] if position is not None else 0
