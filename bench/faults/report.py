"""The faults run's record as lines and as the Markdown table bench/results/faults.md."""

from __future__ import annotations

from typing import Any

from .lab import MAX_PENDING
from .network import NETWORK_KINDS, NetworkFault


def describe(f: dict[str, Any]) -> str:
    line = (
        f"{f['fault']}: current again after {f['recovery_s']} s, lost {f['lost']}, stale {f['stale']} of {f['checked']}, "
        f"gaps {f['gaps']}, duplicates {f['duplicates']}, resyncs {f['resyncs']}, reconnects {f['reconnects']}, "
        f"p99 {f['p99_ms']} ms, {f['changes']:,} changes ({f['failed_commits']} commits failed)"
    )
    if "kind" in f:
        line += (
            f"; for {f['duration_s']:g} s, current again {f['healed_s']} s after the heal; peak RSS node "
            f"{f['node_rss_peak_mb']} MiB (from {f['node_rss_before_mb']}), relay {f['relay_rss_peak_mb']} MiB "
            f"(from {f['relay_rss_before_mb']}); relay {f['relay_before']} -> {f['relay_after']}"
        )
        if f["other_node_s"] is not None or f["link"] == "node → Redis" and f["kind"] == "half-open":
            line += f"; node1's client held the change after {f['other_node_s']} s"
    if "stall_s" in f:
        line += (
            f"; node0 RSS grew at most {f['node_rss_max_growth_mb']} MiB, slow client: read {f['slow_read_during_stall']}, "
            f"{f['slow_resyncs']} resyncs, "
            f"close {f['slow_close']}; stalled peer: close {f['stalled_close']}; a reading client got {f['reading_client_received_mb']} MiB; "
            f"others' marker delays {f['others_marker_delays_s']} s"
        )
    return line


def dash(value: Any) -> str:
    return "-" if value is None else str(value)


def markdown(record: dict[str, Any]) -> str:
    size = record["size"]
    lines = [
        f"## faults under the steady load: {size['subscribers']:,} subscribers over {size['teams']} teams, "
        f"{size['rate'] * 5:,.0f} job changes a second",
        "",
        "| fault | current again after (s) | lost | stale | subscriptions checked | gaps | duplicates | resyncs | reconnects | p99 (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in record["phases"]:
        if "kind" in f:
            continue
        lines.append(
            f"| {f['fault']} | {f['recovery_s'] if f['recovery_s'] is not None else '-'} | {f['lost']} | {f['stale']} | "
            f"{f['checked']} | {f['gaps']} | {f['duplicates']} | {f['resyncs']} | {f['reconnects']} | {f['p99_ms']} |"
        )
    network = [f for f in record["phases"] if "kind" in f]
    if network:
        lines += [
            "",
            "Network faults on one link each (node0's, or the active relay's), through a fault proxy, then healed "
            "(current: every subscriber holds a change committed just after the fault, or just after the heal):",
            "",
            "| fault | link | duration (s) | lost | stale | duplicates | current after fault (s) | current after heal (s) "
            "| peak node RSS (MiB) | peak relay RSS (MiB) | gaps | resyncs | reconnects | relay |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for f in network:
            relay = (
                f["relay_before"]
                if f["relay_after"] == f["relay_before"]
                else f"{f['relay_before']} → {f['relay_after']}"
            )
            lines.append(
                f"| {NETWORK_KINDS[f['kind']]} | {f['link']} | {f['duration_s']:g} | {f['lost']} | {f['stale']} | "
                f"{f['duplicates']} | {dash(f['recovery_s'])} | {dash(f['healed_s'])} | {f['node_rss_peak_mb']} "
                f"(from {f['node_rss_before_mb']}) | {f['relay_rss_peak_mb']} (from {f['relay_rss_before_mb']}) | "
                f"{f['gaps']} | {f['resyncs']} | {f['reconnects']} | {relay} |"
            )
        witness = [
            f
            for f in network
            if f["other_node_s"] is not None or f["fault"] == NetworkFault("half-open", "node → Redis").name
        ]
        for f in witness:
            lines += [
                "",
                f"While node0 was cut off from Redis, a client of node1 held a change committed then after {dash(f['other_node_s'])} s.",
            ]
    stall = record["phases"][-1]
    lines += [
        "",
        f"For {stall['stall_s']:.0f} s one client read slowly ({stall['slow_read_during_stall']:,} messages, at most 20 a "
        f"second) and another not at all: node RSS grew at most {stall['node_rss_max_growth_mb']} MiB "
        f"(bound {MAX_PENDING >> 20} MiB a connection) while a client reading the same channels received "
        f"{stall['reading_client_received_mb']} MiB; the slow one got {stall['slow_resyncs']} resyncs "
        f"(close: {stall['slow_close']}), the stalled peer was closed ({stall['stalled_close']}); a marker reached every other "
        f"subscriber in {stall['others_marker_delays_s']} s.",
    ]
    return "\n".join(lines) + "\n"
