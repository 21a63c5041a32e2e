"""Results: the JSON record, a markdown table with every figure as a ratio to the best peer, PNG plots."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

LOWER_IS_BETTER = ("cpu_us_per_frame", "cpu_us_per_delta", "rss_kb_per_conn", "p50_ms", "p99_ms")
COLUMNS = [
    ("cpu_us_per_frame", "CPU µs/frame"),
    ("cpu_us_per_delta", "CPU µs/delta"),
    ("rss_kb_per_conn", "KB/conn"),
    ("connect_kb_per_sub", "KB/sub in (connect)"),
    ("kb_per_sub", "KB/sub in (measured)"),
    ("p50_ms", "p50 ms"),
    ("p99_ms", "p99 ms"),
    ("max_ms", "max ms"),
    ("frames_per_s", "frames/s"),
    ("deltas_per_s", "deltas/s"),
    ("frames", "frames"),
    ("deltas", "deltas"),
    ("lost", "lost"),
    ("stale", "stale"),
]


def best_peer(systems: dict[str, dict[str, Any]], peers: list[str], key: str) -> float | None:
    values = [
        systems[p][key] for p in peers if p in systems and _number(systems[p].get(key)) and systems[p].get("correct")
    ]
    if not values:  # no peer was correct: compare with the best of them anyway, and say so in the table
        values = [systems[p][key] for p in peers if p in systems and _number(systems[p].get(key))]
    return min(values) if values else None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def ratios(systems: dict[str, dict[str, Any]], peers: list[str]) -> dict[str, dict[str, float]]:
    """Every lower-is-better figure of every system divided by the best peer's."""
    out: dict[str, dict[str, float]] = {}
    for key in LOWER_IS_BETTER:
        best = best_peer(systems, peers, key)
        if not best:
            continue
        for name, figures in systems.items():
            if _number(figures.get(key)):
                out.setdefault(name, {})[key] = round(figures[key] / best, 3)
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def markdown(title: str, systems: dict[str, dict[str, Any]], peers: list[str], extra: list[str] | None = None) -> str:
    rel = ratios(systems, peers)
    lines = [
        f"### {title}",
        "",
        "| system | " + " | ".join(label for _, label in COLUMNS) + " | correct |",
        "|---" * (len(COLUMNS) + 2) + "|",
    ]
    for name, figures in systems.items():
        cells = []
        for key, _ in COLUMNS:
            cell = _fmt(figures.get(key))
            if key in rel.get(name, {}):
                cell += f" ({rel[name][key]:.2f}×)"
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_fmt(figures.get('correct'))} |")
    lines += ["", "Ratios (×) are to the best peer in this run (" + ", ".join(peers) + "); lower is better."]
    return "\n".join(lines + (extra or [])) + "\n"


def write(
    out: Path, scenario: str, record: dict[str, Any], tables: list[str], curves: dict[str, list[tuple[float, float]]]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{scenario}.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    (out / f"{scenario}.md").write_text(f"## `{scenario}`\n\n`{record['command']}`\n\n" + "\n".join(tables))
    plot(out, scenario, record["systems"], curves)


def plot(
    out: Path, scenario: str, systems: dict[str, dict[str, Any]], curves: dict[str, list[tuple[float, float]]]
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for name, points in curves.items():
        if points:
            ax.plot([p[1] for p in points], [p[0] for p in points], label=name)
    ax.set_xscale("log")
    ax.set_xlabel("latency from commit to receipt (ms)")
    ax.set_ylabel("fraction of deltas")
    ax.set_title("Latency CDF")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    for ax, key, label in (
        (axes[1], "cpu_us_per_delta", "server CPU µs per delivered delta"),
        (axes[2], "rss_kb_per_conn", "server RSS KB per connection"),
    ):
        names = [n for n in systems if _number(systems[n].get(key))]
        ax.bar(names, [systems[n][key] for n in names], color=["#2a7" if n == "gateway" else "#888" for n in names])
        ax.set_title(label)
        if key.startswith("cpu"):
            ax.set_yscale("log")  # peers differ by orders of magnitude
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"bench {scenario}")
    fig.tight_layout()
    fig.savefig(out / f"{scenario}.png", dpi=110)
    plt.close(fig)


def cdf(histogram: Any, points: int = 60) -> list[tuple[float, float]]:
    """(fraction, latency ms) points of a bench.subscribers.Histogram."""
    if histogram is None or not histogram.count:
        return []
    qs = [100 * (1 - 10 ** (-4 * i / points)) for i in range(points + 1)]  # dense toward the tail
    return [(q / 100, histogram.percentile(max(q, 0.01))) for q in qs]
