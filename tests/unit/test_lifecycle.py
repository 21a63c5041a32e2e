"""The submission lifecycle: one transition table, true to how a submission's status really moves, checked on a
cluster's staging reports, and drawn whole (every status, every move) in the Submissions page's colours."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from gateway.core.control import TASK_ACTIONS
from gateway.core.lifecycle import (
    MEANINGS,
    READY,
    START,
    STATUS_COLOURS,
    TRANSITIONS,
    Transition,
    staging_reachable,
    staging_refusal,
)
from gateway.core.model import Counts
from gateway.core.status import STATUSES
from gateway.core.submission import STAGING, SUBMISSION_STATUSES, submission_status
from gateway.web.team.lifecycle import BOX_H, BOX_W, HEIGHT, PALETTE, PLACES, ROUTES, WIDTH, lifecycle_svg
from tests.browser.helpers import ROOT

SVG = "{http://www.w3.org/2000/svg}"
ACTION_OF_LABEL = {
    "Hold": "hold",
    "Unhold": "unhold",
    "Kill": "kill",
    "Retry": "retry",
    "Retry Failed": "retry_failed",
    "Retry Preempted": "retry_preempted",
}


def test_the_table_covers_the_twelve_statuses_of_the_submissions_document() -> None:
    assert tuple(STATUS_COLOURS) == SUBMISSION_STATUSES
    assert set(MEANINGS) == set(SUBMISSION_STATUSES)
    moved_into = {t.target for t in TRANSITIONS}
    moved_from = {t.source for t in TRANSITIONS}
    assert moved_into == set(SUBMISSION_STATUSES)  # every status can be reached ...
    assert moved_from - {START} == set(SUBMISSION_STATUSES)  # ... and left (downloaded: only by a Retry)
    # One arrow per move and cause: running to failed is a task's failure, and a Kill
    assert len({(t.source, t.target, t.cause) for t in TRANSITIONS}) == len(TRANSITIONS)
    for t in TRANSITIONS:
        if t.staging is not None:  # a cluster's staging report: to that staging, or (ready) to the tasks' phase
            assert t.target == (t.staging if t.staging in STAGING else "pending"), t
            assert t.source in (START, *STAGING), t
        else:
            assert t.source not in STAGING, t  # the data's path moves only by what its cluster reports


def _tasks(n: int) -> list[tuple[str, ...]]:
    """Every way `n` tasks can stand (their statuses, in no order)."""
    return list(itertools.combinations_with_replacement(STATUSES, n))


def _status(tasks: tuple[str, ...] | list[str], downloaded: bool) -> str:
    return submission_status(READY, Counts(**Counter(tasks)), downloaded)


def _moves() -> dict[str, set[tuple[str, str]]]:
    """Every move one event makes to a submission whose data is in place (up to three tasks): one task changes
    (or arrives, or leaves), an action of the Submissions page's menu takes its tasks, or its results are
    downloaded. Keyed by what made it: "tasks", "downloaded", or the action's name."""
    made: dict[str, set[tuple[str, str]]] = {"tasks": set(), "downloaded": set()}
    for n in range(4):
        for tasks in _tasks(n):
            for downloaded in (False, True):
                before = _status(tasks, downloaded)
                afters: list[tuple[str, list[str]]] = []
                for i in range(n):
                    for becomes in STATUSES:
                        afters.append(("tasks", [*tasks[:i], becomes, *tasks[i + 1 :]]))
                    afters.append(("tasks", [*tasks[:i], *tasks[i + 1 :]]))
                for arrives in STATUSES:
                    afters.append(("tasks", [*tasks, arrives]))
                for action in TASK_ACTIONS.values():
                    afters.append((action.name, [action.becomes if s in action.takes else s for s in tasks]))
                for cause, after in afters:
                    # A retry's new attempt takes the downloaded mark off (gateway.store.tasks.set_task_status).
                    still = downloaded and not (cause in TASK_ACTIONS and TASK_ACTIONS[cause].new_attempt)
                    made.setdefault(cause, set()).add((before, _status(after, still)))
                made["downloaded"].add((before, _status(tasks, True)))
    return made


def test_every_move_of_the_table_is_one_the_status_really_makes() -> None:
    """No arrow of the diagram is fiction: each move a task, an action or a download makes is one that
    `submission_status` makes from some tasks by that very event."""
    made = _moves()
    for t in TRANSITIONS:
        if t.staging is not None:
            continue  # the data's path: checked at ingest (below)
        if t.cause == "action":  # every action the arrow names makes that move
            for label in t.label.split(", "):
                assert (t.source, t.target) in made[ACTION_OF_LABEL[label]], (t, label)
        else:
            assert (t.source, t.target) in made["downloaded" if t.cause == "cluster" else "tasks"], t


def test_kill_hold_and_the_retries_are_drawn_from_every_status_they_move() -> None:
    """The diagram drew Kill only from pending, where people kill running and held work. From every status that an
    action of the menu moves a submission out of (taking some of its tasks), an arrow naming that action leaves."""
    named = {(t.source, label) for t in TRANSITIONS if t.cause == "action" for label in t.label.split(", ")}
    for label, name in ACTION_OF_LABEL.items():
        action = TASK_ACTIONS[name]
        for n in range(1, 4):
            for tasks in _tasks(n):
                if not any(s in action.takes for s in tasks):
                    continue  # the menu does not offer it here: nothing it could take
                for downloaded in (False, True):
                    before = _status(tasks, downloaded)
                    after = [action.becomes if s in action.takes else s for s in tasks]
                    if _status(after, downloaded and not action.new_attempt) != before:
                        assert (before, label) in named, (label, tasks, downloaded)


@pytest.mark.parametrize("current", [*STAGING, READY])
def test_a_cluster_moves_data_forward_along_the_table_never_back(current: str) -> None:
    forward = {
        "upload_pending": {"upload_pending", "uploading", "sync_pending", "syncing", "sync_failed", READY},
        "uploading": {"uploading", "sync_pending", "syncing", "sync_failed", READY},
        "sync_pending": {"sync_pending", "syncing", "sync_failed", READY},
        "syncing": {"syncing", "sync_failed", READY},
        "sync_failed": {"sync_failed", "syncing", READY},  # retried (by a person or the cluster's operator)
        READY: {READY},  # the data is in place: it never goes back
    }
    assert staging_reachable(current) == forward[current]
    for requested in (*STAGING, READY):
        refusal = staging_refusal(12, current, requested)
        assert (refusal is None) == (requested in forward[current]), (current, requested)


def test_a_refused_move_names_where_the_submission_is_and_where_it_may_go() -> None:
    assert staging_refusal(12, "syncing", "uploading") == (
        "staging: submission 12 cannot move from syncing to uploading; from syncing it moves to sync_failed or ready"
    )
    assert staging_refusal(12, READY, "syncing") == (
        "staging: submission 12 cannot move from ready to syncing; its data is in place"
    )
    assert staging_refusal(12, "sync_failed", "uploading") == (
        "staging: submission 12 cannot move from sync_failed to uploading; from sync_failed it moves to syncing"
    )


# -- the diagram


def _svg() -> ET.Element:
    return ET.fromstring(lifecycle_svg())


def _text(g: ET.Element) -> str:
    return "".join(g.find(f"{SVG}text").itertext())  # type: ignore[union-attr]


def test_the_diagram_draws_every_status_in_the_submissions_pages_colour() -> None:
    svg = _svg()
    assert svg.get("role") == "img" and svg.get("aria-labelledby") == "lifecycle-title lifecycle-desc"
    assert svg.find(f"{SVG}title").text == "How a submission moves through its statuses"  # type: ignore[union-attr]
    drawn = {g.get("data-status"): g for g in svg.iter(f"{SVG}g") if g.get("class") == "status"}
    assert list(drawn) == list(SUBMISSION_STATUSES)
    for status, g in drawn.items():
        colour = PALETTE[STATUS_COLOURS[str(status)]]
        assert _text(g) == status
        assert g.find(f"{SVG}rect").get("stroke") == colour  # type: ignore[union-attr]
        assert g.find(f"{SVG}text").get("fill") == colour  # type: ignore[union-attr]
        assert g.find(f"{SVG}title").text == f"{status}: {MEANINGS[status]}"  # type: ignore[union-attr]


def test_the_diagram_draws_every_move_of_the_table_with_its_label() -> None:
    svg = _svg()
    drawn = [g for g in svg.iter(f"{SVG}g") if g.get("class") == "transition"]
    assert [(g.get("data-source"), g.get("data-target"), _text(g), g.get("data-cause")) for g in drawn] == [
        (t.source, t.target, t.label, t.cause) for t in TRANSITIONS
    ]
    for g in drawn:
        path = g.find(f"{SVG}path")
        assert path is not None and path.get("marker-end", "").startswith("url(#arrow")
        action = g.get("data-cause") == "action"
        assert (path.get("stroke-dasharray") is not None) == action  # an action's arrow is dashed
    desc = svg.find(f"{SVG}desc").text or ""  # type: ignore[union-attr]
    for t in TRANSITIONS:  # a screen reader hears every move too
        assert f"{t.source} to {t.target}: {t.label}" in desc


def test_the_diagram_has_a_place_for_everything_and_nothing_else() -> None:
    assert set(PLACES) == {START, *SUBMISSION_STATUSES}
    assert set(ROUTES) <= {(t.source, t.target, t.cause) for t in TRANSITIONS}  # no route for a move it lacks
    boxes = {
        s: (x - BOX_W / 2, y - BOX_H / 2, x + BOX_W / 2, y + BOX_H / 2) for s, (x, y) in PLACES.items() if s != START
    }
    for (a, (l1, t1, r1, b1)), (b, (l2, t2, r2, b2)) in itertools.combinations(boxes.items(), 2):
        assert r1 + 20 <= l2 or r2 + 20 <= l1 or b1 + 20 <= t2 or b2 + 20 <= t1, (a, b)  # apart
    for left, top, right, bottom in boxes.values():
        assert 0 <= left and right <= WIDTH and 0 <= top and bottom <= HEIGHT
    for route in ROUTES.values():
        assert 0 <= route.label_at[0] <= WIDTH and 0 <= route.label_at[1] <= HEIGHT


def test_the_diagrams_palette_is_the_pages() -> None:
    css = (ROOT / "frontend" / "style.css").read_text()
    root = css[css.index(":root {") :].split("}", 1)[0]
    variables = dict(re.findall(r"--([a-z]+):\s*(#[0-9a-f]{6})", root))
    for name in ("blue", "amber", "green", "red"):
        assert PALETTE[name] == variables[name]
    assert PALETTE[""] == variables["ink"]


def _segments() -> list[tuple[Transition, tuple[float, float], tuple[float, float]]]:
    """Every straight piece of every arrow as drawn."""
    pieces = []
    for g in _svg().iter(f"{SVG}g"):
        if g.get("class") != "transition":
            continue
        path = g.find(f"{SVG}path").get("d", "")  # type: ignore[union-attr]
        points = [tuple(map(float, p.split(","))) for p in re.findall(r"[ML]([-\d.]+,[-\d.]+)", path)]
        t = next(
            t
            for t in TRANSITIONS
            if (t.source, t.target, t.cause) == (g.get("data-source"), g.get("data-target"), g.get("data-cause"))
        )
        pieces += [(t, a, b) for a, b in itertools.pairwise(points)]  # type: ignore[arg-type]
    return pieces


def _cross(p1: tuple[float, float], p2: tuple[float, float], q1: tuple[float, float], q2: tuple[float, float]) -> bool:
    """Whether two segments meet (touching or overlapping counts)."""

    def side(a: tuple[float, float], b: tuple[float, float], c: tuple[float, float]) -> float:
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    def within(a: tuple[float, float], b: tuple[float, float], c: tuple[float, float]) -> bool:
        return min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])

    d1, d2, d3, d4 = side(q1, q2, p1), side(q1, q2, p2), side(p1, p2, q1), side(p1, p2, q2)
    if ((d1 > 0) != (d2 > 0)) and ((d3 > 0) != (d4 > 0)) and 0 not in (d1, d2, d3, d4):
        return True
    return any(
        d == 0 and within(a, b, c)
        for d, a, b, c in ((d1, q1, q2, p1), (d2, q1, q2, p2), (d3, p1, p2, q1), (d4, p1, p2, q2))
    )


def test_no_two_arrows_of_the_diagram_cross_or_touch() -> None:
    """Its arrows crossed: a reader could not follow Kill from pending to failed. Each piece of every arrow is
    checked against every piece of every other arrow."""
    pieces = _segments()
    assert len({id(t) for t, _, _ in pieces}) == len(TRANSITIONS)
    for (t1, a1, b1), (t2, a2, b2) in itertools.combinations(pieces, 2):
        if t1 is not t2:
            assert not _cross(a1, b1, a2, b2), (t1, t2)


def test_every_arrow_runs_outside_the_boxes_it_does_not_join() -> None:
    boxes = {
        s: (x - BOX_W / 2, y - BOX_H / 2, x + BOX_W / 2, y + BOX_H / 2) for s, (x, y) in PLACES.items() if s != START
    }
    for t, a, b in _segments():
        for status, (left, top, right, bottom) in boxes.items():
            if status in (t.source, t.target):
                continue
            corners = [(left, top), (right, top), (right, bottom), (left, bottom)]
            edges = list(zip(corners, corners[1:] + corners[:1]))
            inside = left < a[0] < right and top < a[1] < bottom
            assert not inside and not any(_cross(a, b, c, d) for c, d in edges), (t, status)
