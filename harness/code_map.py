"""docs/code.md's map of the code, read as data, and docs/rooms.svg drawn from it.

The picture the README opens with is made here from the map's table, so the picture and the map (which a test holds
to the package's modules) cannot drift: `python -m harness.code_map` writes docs/rooms.svg, and
tests/unit/test_code_map.py checks that the file is what this draws now.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "code.md"
SVG = ROOT / "docs" / "rooms.svg"


def rooms(text: str | None = None) -> dict[str, list[str]]:
    """Each room of the map (`core/`, ..., and `` for the package's top level) with the modules its rows name."""
    text = MAP.read_text() if text is None else text
    table = text  # the page is the map: its table rows, room by room
    found: dict[str, list[str]] = {}
    room = ""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or set(cells[0]) <= {"-"} and cells[0]:
            continue
        first = re.match(r"`(\w+)/`", cells[0])
        if first:
            room = first.group(1) + "/"
        elif cells[0] == "elsewhere":
            room = ""
        elif cells[0] == "room":
            continue
        found.setdefault(room, []).extend(re.findall(r"`(\w+(?:\.py|/))`", cells[1]))
    return found


# Where each room stands: the data path runs left to right along the top row, control comes back along the
# second, the pure core lies under everything that uses it. (column, row, what it is in the data path)
PLACES = {
    "store/": (0, 0, "PostgreSQL: jobs, the outbox written in the change's transaction"),
    "relay/": (1, 0, "one active per partition: reads the outbox commit-safe, encodes each batch once"),
    "bus/": (2, 0, "Redis pub/sub: per team, team feed, per trajectory; history for reconnects"),
    "hub/": (3, 0, "a node's connections: the same bytes to every local subscriber"),
    "web/": (4, 0, "HTTP and websockets: ingest, the API, /ws, the browser app"),
    "sim/": (0, 1, "simulated clusters: the demo's and the tests' writers"),
    "control/": (4, 1, "actions back to the clusters that hold the work, and their confirmations"),
    "client/": (3, 1, "the Python client tools follow the feed with"),
    "core/": (0, 2, "pure rules without I/O: statuses, batching, aggregates, finishes, the wire, roles"),
    "": (1, 1, "the package's top level: the CLI, settings, checks, the demo"),
}
W, H, GAP, PAD = 230, 132, 28, 16


def draw(found: dict[str, list[str]]) -> str:
    """The SVG: one box per room with its modules counted and the first of them named, arrows along the path."""
    unplaced = sorted(set(found) - set(PLACES))
    if unplaced:
        raise ValueError(f"rooms on the map with no place in harness/code_map.PLACES: {unplaced}")
    width = 5 * W + 4 * GAP + 2 * PAD
    height = 3 * H + 2 * GAP + 2 * PAD + 24
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        ' role="img" aria-labelledby="rooms-title" font-family="system-ui, sans-serif" font-size="12">',
        "<title id=\"rooms-title\">The gateway's rooms along the data path, drawn from docs/code.md's map"
        " of the code</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7"'
        ' orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
    ]

    def box(room: str) -> tuple[int, int]:
        col, row, _ = PLACES[room]
        return PAD + col * (W + GAP), PAD + row * (H + GAP)

    for a, b in (("store/", "relay/"), ("relay/", "bus/"), ("bus/", "hub/"), ("hub/", "web/")):
        (ax, ay), (bx, _) = box(a), box(b)
        out.append(
            f'<line x1="{ax + W}" y1="{ay + H // 2}" x2="{bx - 2}" y2="{ay + H // 2}" stroke="#555"'
            ' stroke-width="1.5" marker-end="url(#arrow)"/>'
        )
    (cx, cy), (wx, wy) = box("control/"), box("web/")
    out.append(
        f'<line x1="{wx + W // 2}" y1="{wy + H}" x2="{cx + W // 2}" y2="{cy - 2}" stroke="#a33"'
        ' stroke-width="1.5" stroke-dasharray="5 3" marker-end="url(#arrow)"/>'
    )
    for room in sorted(found, key=lambda r: PLACES[r][:2][::-1]):
        x, y = box(room)
        _, row, what = PLACES[room]
        core = room == "core/"
        fill = "#eef5ee" if core else "#f3f6fb" if row == 0 else "#faf7f0"
        box_width = 5 * W + 4 * GAP if core else W
        modules = sorted(m for m in found[room] if m != "__init__.py")
        out.append(f'<rect x="{x}" y="{y}" width="{box_width}" height="{H}" rx="6" fill="{fill}" stroke="#889"/>')
        title = room or "gateway/"
        out.append(
            f'<text x="{x + 10}" y="{y + 20}" font-weight="600" font-size="14">{escape(title)}'
            f'<tspan font-weight="400" font-size="12" fill="#555"> {len(modules)} modules</tspan></text>'
        )
        for i, line in enumerate(_wrap(what, 106 if core else 34)):
            out.append(f'<text x="{x + 10}" y="{y + 38 + 15 * i}" fill="#333">{escape(line)}</text>')
        names = ", ".join(m.removesuffix(".py") for m in modules)
        for i, line in enumerate(_wrap(names, 150 if core else 38)[:3]):
            out.append(f'<text x="{x + 10}" y="{y + 86 + 14 * i}" fill="#667" font-size="11">{escape(line)}</text>')
    out.append(
        f'<text x="{PAD}" y="{height - 10}" fill="#555">Top row: a change from PostgreSQL to a browser, left to right.'
        " Dashed: an action going back to the cluster that holds the work. Every room above uses core/, which does no I/O.</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    if len(lines) > 3:
        lines[2] += " …"
    return lines


if __name__ == "__main__":
    SVG.write_text(draw(rooms()))
    print(f"wrote {SVG.relative_to(ROOT)}")
