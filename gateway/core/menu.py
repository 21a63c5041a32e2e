"""Which actions the Submissions page's menu offers for the selected rows: only those that apply to every one of
them (no Hold on a downloaded submission). One rule, run by the browser too (frontend/js/rules.js, `menuActions`;
the shared vectors in frontend/vectors/jobs-view.json hold both to it).

A task action applies to a row when it has a task the action takes (gateway.core.control, TASK_ACTIONS); Retry
Sync when its data's sync failed; Edit / Instance Type while some of its tasks have not run (queued, retrying or
held) or its tasks are still to come (its data on its way, or no task yet): it changes only those. Edit / Priority
and Reviewed apply to any row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .control import TASK_ACTIONS
from .submission import STAGING

NOT_RUN = ("queued", "retrying", "holding")  # tasks an instance type still applies to
ALWAYS = ("reviewed", "priority")
ORDER = (*TASK_ACTIONS, "retry_sync", "reviewed", "instance_type", "priority")  # the menu's order


def row_actions(staging: str, counts: Mapping[str, int]) -> set[str]:
    """The actions that apply to one row (its staging, and its tasks' counts by status)."""
    applies = {name for name, a in TASK_ACTIONS.items() if any(counts.get(s, 0) for s in a.takes)}
    if staging == "sync_failed":
        applies.add("retry_sync")
    if staging in STAGING or not sum(counts.values()) or any(counts.get(s, 0) for s in NOT_RUN):
        applies.add("instance_type")
    return applies | set(ALWAYS)


def menu_actions(rows: Iterable[tuple[str, Mapping[str, int]]]) -> list[str]:
    """The actions that apply to every row, in the menu's order."""
    common: set[str] | None = None
    for staging, counts in rows:
        each = row_actions(staging, counts)
        common = each if common is None else common & each
    return [a for a in ORDER if a in (common or set())]
