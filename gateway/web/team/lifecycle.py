"""`GET /submissions/lifecycle.svg`: how a submission moves through its statuses, drawn from the transition table
the gateway checks (gateway.core.lifecycle), so the picture cannot say what the server does not do.

Every status and every move of the table is drawn; only where they sit is decided here. A move without a
route of its own is a straight arrow between its two boxes, labelled at its middle.
"""

from __future__ import annotations

import math
from html import escape
from typing import NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from ...core.lifecycle import MEANINGS, START, STATUS_COLOURS, TRANSITIONS, Transition

WIDTH, HEIGHT = 1090, 550
BOX_W, BOX_H = 128, 36
# The Submissions page's palette (frontend/style.css, :root; a unit test holds the two equal). Presentation
# attributes, not a <style>: the Content-Security-Policy refuses inline styles, and attributes are not styles.
# They draw the light picture when the SVG is opened on its own; inside the page (lifecycle.js puts it inline) the
# page's stylesheet repaints each part from the theme's variables by its class (a CSS rule beats an attribute), so
# the diagram follows the dark theme.
PALETTE = {"blue": "#1d63d6", "amber": "#a14a06", "green": "#157a3a", "red": "#b91c1c", "": "#1d2330"}
MUTED = "#5b6270"
LINE = "#8a909c"
ACTION = "#1d4ed8"

# Where each status sits (its box's centre): the data's path along the top, the tasks' statuses below it, with
# holding and failed under pending and running.
PLACES: dict[str, tuple[float, float]] = {
    START: (24, 70),
    "upload_pending": (190, 70),
    "uploading": (390, 70),
    "sync_pending": (590, 70),
    "syncing": (790, 70),
    "sync_failed": (990, 70),
    "preempted": (590, 180),
    "pending": (390, 285),
    "running": (590, 285),
    "success": (790, 285),
    "downloaded": (990, 285),
    "holding": (190, 430),
    "failed": (590, 430),
}


class Route(NamedTuple):
    """How one move is drawn: its points (None: a straight arrow between the boxes, moved `shift` px to its
    left so that moves between the same boxes run side by side) and where its label sits."""

    label_at: tuple[float, float]
    anchor: str = "middle"  # the label's text-anchor
    points: tuple[tuple[float, float], ...] | None = None
    shift: float = 0


_TOP = 70 - BOX_H / 2 - 8  # labels of the top row's moves sit above its boxes
_MAIN = 285
_ABOVE_MAIN = _MAIN - BOX_H / 2  # the main row's top edge, where the moves into pending from above arrive
# Keyed by (source, target, cause): running to failed is two moves (a task fails; Kill). The routes into pending
# from above nest (each one's turn inside the one before), and running and holding meet around the bottom: no
# two arrows cross (a unit test holds it).
ROUTES: dict[tuple[str, str, str], Route] = {
    (START, "upload_pending", "cluster"): Route((70, 62)),
    (START, "pending", "cluster"): Route((170, _MAIN - 8), points=((24, 70), (24, _MAIN), (390 - BOX_W / 2, _MAIN))),
    ("upload_pending", "uploading", "cluster"): Route((290, _TOP)),
    ("uploading", "sync_pending", "cluster"): Route((490, _TOP)),
    ("sync_pending", "syncing", "cluster"): Route((690, _TOP)),
    ("syncing", "sync_failed", "cluster"): Route((890, _TOP), shift=6),
    ("sync_failed", "syncing", "action"): Route((890, 70 + BOX_H / 2 + 14), shift=6),
    ("syncing", "pending", "cluster"): Route(
        (575, 104), points=((790, 70 + BOX_H / 2), (790, 110), (336, 110), (336, _ABOVE_MAIN))
    ),
    ("downloaded", "pending", "action"): Route(
        (940, 137), points=((990, _ABOVE_MAIN), (990, 122), (350, 122), (350, _ABOVE_MAIN))
    ),
    ("success", "pending", "action"): Route(
        (700, 148), points=((790, _ABOVE_MAIN), (790, 134), (364, 134), (364, _ABOVE_MAIN))
    ),
    ("preempted", "pending", "action"): Route(
        (520, 174), anchor="end", points=((590 - BOX_W / 2, 180), (440, 180), (440, _ABOVE_MAIN))
    ),
    ("running", "preempted", "tasks"): Route((578, 236), anchor="end", shift=6),
    ("preempted", "running", "action"): Route((602, 236), anchor="start", shift=6),
    ("pending", "running", "tasks"): Route((490, _MAIN - 16), shift=6),
    ("running", "pending", "action"): Route((490, _MAIN + 22), shift=6),
    ("running", "success", "tasks"): Route((690, _MAIN - BOX_H / 2 - 6)),
    ("success", "downloaded", "cluster"): Route((890, _MAIN - BOX_H / 2 - 6)),
    ("running", "failed", "tasks"): Route((570, 330), anchor="end", shift=-14),
    ("running", "failed", "action"): Route((570, 346), anchor="end"),
    ("failed", "running", "action"): Route((610, 362), anchor="start", shift=-14),
    ("pending", "holding", "action"): Route((298, 378), anchor="start", shift=6),
    ("holding", "pending", "action"): Route((282, 346), anchor="end", shift=6),
    ("pending", "failed", "action"): Route((506, 350), anchor="start", shift=6),
    ("failed", "pending", "action"): Route((478, 380), anchor="end", shift=6),
    ("holding", "failed", "action"): Route((390, 424)),
    ("running", "holding", "action"): Route(
        (440, 466), points=((654, _MAIN + 14), (700, _MAIN + 14), (700, 472), (200, 472), (200, 430 + BOX_H / 2))
    ),
    ("holding", "running", "action"): Route(
        (440, 500), points=((180, 430 + BOX_H / 2), (180, 486), (712, 486), (712, _MAIN + 6), (654, _MAIN + 6))
    ),
}


def lifecycle_svg() -> str:
    """The diagram: an accessible SVG (its title, a description naming every move, text labels), in the
    Submissions page's colours."""
    desc = "; ".join(f"{t.source} to {t.target}: {t.label}" for t in TRANSITIONS)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}"'
        ' role="img" aria-labelledby="lifecycle-title lifecycle-desc" font-family="system-ui, sans-serif">',
        '<title id="lifecycle-title">How a submission moves through its statuses</title>',
        f'<desc id="lifecycle-desc">{escape(desc)}.</desc>',
        "<defs>",
        _marker("arrow", LINE, "move"),
        _marker("arrow-action", ACTION, "action"),
        "</defs>",
        '<rect class="ground" width="100%" height="100%" fill="#fff"/>',
    ]
    parts += [_transition(t) for t in TRANSITIONS]
    parts.append(_start())
    parts += [_status(s) for s in STATUS_COLOURS]
    parts.append(_legend())
    parts.append("</svg>")
    return "\n".join(parts)


def _marker(name: str, colour: str, kind: str) -> str:
    return (
        f'<marker id="{name}" class="{kind}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7"'
        f' orient="auto-start-reverse"><path class="head" d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
    )


def _start() -> str:
    x, y = PLACES[START]
    return (
        f'<g class="start"><title>A submission starts here</title>'
        f'<circle class="dot" cx="{x}" cy="{y}" r="8" fill="{PALETTE[""]}"/></g>'
    )


def _status(status: str) -> str:
    x, y = PLACES[status]
    colour = PALETTE[STATUS_COLOURS[status]]
    return (
        f'<g class="status" data-status="{status}" data-colour="{STATUS_COLOURS[status]}">'
        f"<title>{escape(status)}: {escape(MEANINGS[status])}</title>"
        f'<rect class="box" x="{x - BOX_W / 2:g}" y="{y - BOX_H / 2:g}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="#fff"'
        f' stroke="{colour}" stroke-width="2"/>'
        f'<text x="{x:g}" y="{y + 5:g}" text-anchor="middle" font-size="14" fill="{colour}">{escape(status)}</text>'
        "</g>"
    )


def _transition(t: Transition) -> str:
    route = ROUTES.get((t.source, t.target, t.cause))
    points = _points(t, route)
    if route is None:
        (x1, y1), (x2, y2) = points[0], points[-1]
        label_at, anchor = ((x1 + x2) / 2, (y1 + y2) / 2 - 6), "middle"
    else:
        label_at, anchor = route.label_at, route.anchor
    action = t.cause == "action"
    path = " ".join(f"{'M' if i == 0 else 'L'}{x:g},{y:g}" for i, (x, y) in enumerate(points))
    dash = ' stroke-dasharray="6 4"' if action else ""
    weight = ' font-weight="600"' if action else ""
    return (
        f'<g class="transition" data-source="{t.source}" data-target="{t.target}" data-cause="{t.cause}">'
        f"<title>{escape(t.source)} to {escape(t.target)}: {escape(t.label)}</title>"
        f'<path d="{path}" fill="none" stroke="{ACTION if action else LINE}" stroke-width="1.6"{dash}'
        f' marker-end="url(#{"arrow-action" if action else "arrow"})"/>'
        f'<text x="{label_at[0]:g}" y="{label_at[1]:g}" text-anchor="{anchor}" font-size="12"'
        f' fill="{ACTION if action else MUTED}"{weight}>{escape(t.label)}</text>'
        "</g>"
    )


def _points(t: Transition, route: Route | None) -> list[tuple[float, float]]:
    """The arrow's points: the route's own, or from border to border of the two boxes (the start is a dot)."""
    if route is not None and route.points is not None:
        return list(route.points)
    (x1, y1), (x2, y2) = PLACES[t.source], PLACES[t.target]
    length = math.hypot(x2 - x1, y2 - y1)
    shift = route.shift if route is not None else 0
    # To the left of the direction of travel: two opposite moves between the same boxes do not overlap.
    nx, ny = (y2 - y1) / length * shift, -(x2 - x1) / length * shift
    x1, y1, x2, y2 = x1 + nx, y1 + ny, x2 + nx, y2 + ny
    start = _border(x1, y1, x2 - x1, y2 - y1, dot=t.source == START)
    end = _border(x2, y2, x1 - x2, y1 - y2)
    return [start, end]


def _border(x: float, y: float, dx: float, dy: float, dot: bool = False) -> tuple[float, float]:
    """Where a line leaving (x, y) towards (dx, dy) crosses the edge of the box (or the start's dot) there."""
    length = math.hypot(dx, dy)
    if dot:
        return x + dx / length * 9, y + dy / length * 9
    t = min(BOX_W / 2 / abs(dx) if dx else math.inf, BOX_H / 2 / abs(dy) if dy else math.inf)
    return x + dx * t, y + dy * t


def _legend() -> str:
    y = HEIGHT - 22
    return (
        '<g class="legend"><g data-cause="cluster">'
        f'<path d="M24,{y} L64,{y}" stroke="{LINE}" stroke-width="1.6" marker-end="url(#arrow)"/>'
        f'<text x="72" y="{y + 4}" font-size="12" fill="{MUTED}">the cluster reports it, or the tasks make it</text>'
        '</g><g data-cause="action">'
        f'<path d="M380,{y} L420,{y}" stroke="{ACTION}" stroke-width="1.6" stroke-dasharray="6 4"'
        ' marker-end="url(#arrow-action)"/>'
        f'<text x="428" y="{y + 4}" font-size="12" fill="{ACTION}" font-weight="600">an action of the Submissions'
        " page's menu</text>"
        "</g></g>"
    )


_SVG = lifecycle_svg().encode()


async def lifecycle(request: Request) -> Response:
    return Response(_SVG, media_type="image/svg+xml")
