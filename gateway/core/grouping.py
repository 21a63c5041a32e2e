"""Trajectory > Frame > Job: which group a job is listed in, and what the group is called.

A frame group is `Frame <n>` followed by its timestep; `General` holds jobs tied to no frame; trajectory,
analysis and storage transfers group under `Storage Transfer` (one) or `Storage Transfers` (several), and a
group holding storage transfers opens by itself.
"""

from __future__ import annotations

import msgspec

from .model import Counts, Job

TRANSFER_KINDS = frozenset({"trajectory_transfer", "analysis_transfer", "storage_transfer"})
GENERAL = "general"
TRANSFERS = "transfers"


def group_key(kind: str, frame: int | None) -> str:
    return key_for(kind in TRANSFER_KINDS, frame)


def key_for(transfer: bool, frame: int | None) -> str:
    if transfer:
        return TRANSFERS
    if frame is None:
        return GENERAL
    return f"frame:{frame}"


def job_group(job: Job) -> str:
    return key_for(job.kind in TRANSFER_KINDS, job.frame)


def group_label(key: str, jobs_in_group: int) -> str:
    if key == TRANSFERS:
        return "Storage Transfer" if jobs_in_group == 1 else "Storage Transfers"
    if key == GENERAL:
        return "General"
    return f"Frame {key.partition(':')[2]}"


def group_order(key: str) -> tuple[int, int]:
    """Frames in order, then General, then the transfers."""
    if key.startswith("frame:"):
        return (0, int(key[6:]))
    return (1, 0) if key == GENERAL else (2, 0)


class Group(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A group of a trajectory's jobs with its colour computed by the server (the browser never recomputes
    thousands of frames). `total: 0` means the group is empty now: drop it. Like a job's, its fields at their
    default (null `frame` and `timestep`, `open` false) are left out of the wire; its counts are always whole."""

    key: str
    label: str
    frame: int | None = None
    timestep: float | None = None
    status: str
    total: int
    counts: Counts
    open: bool = False  # groups holding storage transfers open by themselves


def make_group(key: str, counts: Counts, timestep: float | None) -> Group:
    total = counts.total()
    return Group(
        key=key,
        label=group_label(key, total),
        frame=int(key[6:]) if key.startswith("frame:") else None,
        timestep=timestep,
        status=counts.status(),
        total=total,
        counts=counts.copy(),
        open=key == TRANSFERS,
    )
