"""A subscriber's state of a channel's jobs, kept small: job id -> version and status packed in one int
(version << 8 | status code).

A peer's team room also brings the team's counts per status: they are held among its jobs, each under a negative
key (job ids are positive) with the count in the version's place, so the room's state is compared with the
database's as one: `counts_state` is what the harness expects, `pack_counts` what a subscriber keeps."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

SHIFT = 8
MASK = (1 << SHIFT) - 1
STATUS_NAMES: list[str] = ["queued", "retrying", "running", "completed", "failed", "holding", "preempted"]
STATUS_CODES: dict[str, int] = {s: i for i, s in enumerate(STATUS_NAMES)}


def status_code(status: str) -> int:
    code = STATUS_CODES.get(status)
    if code is None:
        if len(STATUS_NAMES) > MASK:
            raise ValueError(f"too many distinct statuses (at {status!r})")
        code = STATUS_CODES[status] = len(STATUS_NAMES)
        STATUS_NAMES.append(status)
    return code


def counts_key(status: str) -> int:
    return -1 - status_code(status)


def pack_counts(jobs: dict[int, int], counts: Mapping[str, int]) -> None:
    for status, n in counts.items():
        code = status_code(status)
        jobs[-1 - code] = (n << SHIFT) | code


def counts_state(counts: Mapping[str, int]) -> dict[int, tuple[int, str]]:
    """A team's counts as a team room's state holds them, unpacked: {counts_key(status): (n, status)}."""
    return {counts_key(status): (n, status) for status, n in counts.items()}


def unpack_jobs(jobs: Mapping[int, int]) -> dict[int, tuple[int, str]]:
    """A packed jobs state as {job_id: (version, status)}."""
    names = STATUS_NAMES
    return {k: (v >> SHIFT, names[v & MASK]) for k, v in jobs.items()}


def dt_ms(dt: datetime) -> float:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp() * 1000.0


def is_team(channel: str) -> bool:
    return channel.startswith("team:")
