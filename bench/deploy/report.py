"""The rolling deploy's record as lines and as the Markdown table bench/results/deploy.md."""

from __future__ import annotations

from typing import Any


def num(value: Any) -> str:
    """A count with thousands separators; "-" for none (a node that did not answer)."""
    return "-" if value is None else f"{value:,}"


def describe(f: dict[str, Any]) -> str:
    h = f["healthz"]
    return (
        f"{f['node']} restarted (exit {f['exit_code']}, {num(f['clients_on_node'])} clients): /readyz 503 after "
        f"{f['readyz_503_s']} s, out of HAProxy after {f['lb_down_s']} s, exited after {f['exit_s']} s, every "
        f"subscriber current after {f['current_s']} s, back in HAProxy after {f['back_in_lb_s']} s; /healthz on the "
        f"other node peak {h['peak_ms']} ms (p99 {h['p99_ms']}, {h['failed']} failed of {h['polls']}); lost "
        f"{f['lost']}, stale {f['stale']} of {f['checked']}, duplicates {f['duplicates']}, resyncs {f['resyncs']}, "
        f"gaps {f['gaps']}, reconnects {f['reconnects']}, closes {f['closes']}, hints {f['hints']}, refused "
        f"{f['failed_connects']}, HAProxy's own 503s {f['haproxy_503s']}, the other node taken out "
        f"{f['other_taken_out']} times; clients after: other node {num(f['clients_on_other_after'])}, restarted "
        f"{num(f['clients_on_restarted_after'])}"
    )


def pinning(pinned: dict[str, list[int]] | None) -> str:
    """What ran where (`--pin`)."""
    if not pinned:
        return "Nothing pinned: every process on every CPU."
    return (
        f"Pinned (`--pin`): the relay, both nodes and HAProxy on CPU {pinned['servers']}, the subscribers' processes "
        f"on CPU {pinned['subscribers']}; PostgreSQL, Valkey and the load's writer on any."
    )


def markdown(record: dict[str, Any]) -> str:
    size = record["size"]
    lines = [
        f"## rolling deploy behind HAProxy: {size['subscribers']:,} subscribers over {size['teams']} teams, "
        f"{size['rate'] * 5:,.0f} job changes a second",
        "",
        f"Two nodes behind {record['haproxy']['processes']} HAProxy process(es) (health checks on /readyz, "
        f"{record['haproxy']['check']}); each node in turn SIGTERMed (drain {record['drain_s']:g} s) and started "
        "again as soon as it had exited. Times are from the SIGTERM; /healthz is the surviving node's, polled "
        "directly 20 times a second from the SIGTERM until every subscriber was current and the restarted node "
        "back in HAProxy. Lost: subscriptions not at the database's state once the load stopped.",
        "",
        pinning(record.get("pinned")),
        "",
        "| node | its clients | /readyz 503 (s) | out of HAProxy (s) | exited (s) | every subscriber current (s) "
        "| back in HAProxy (s) | /healthz peak (ms) | /healthz p99 (ms) | lost | duplicated | resynced | gaps "
        "| reconnects | 1012 closes | distinct retry hints (ms) | refused at the handshake |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in record["restarts"]:
        h, hints = f["healthz"], f["hints"]
        refused = sum(f["failed_connects"].values())
        lines.append(
            f"| {f['node']} | {num(f['clients_on_node'])} | {f['readyz_503_s']} | {f['lb_down_s']} | {f['exit_s']} | "
            f"{f['current_s']} | {f['back_in_lb_s']} | {h['peak_ms']} | {h['p99_ms']} | {f['lost']} | "
            f"{f['duplicates']} | {f['resyncs']} | {f['gaps']} | {num(f['reconnects'])} | "
            f"{num(f['closes'].get(1012, 0))} | {num(hints['distinct'])} ({hints['min_ms']}-{hints['max_ms']}) | "
            f"{num(refused)} |"
        )
    settings = ", ".join(f"{k}={v}" for k, v in record.get("node_settings", {}).items())
    before = [f["healthz_before"]["peak_ms"] for f in record["restarts"]]
    lines += [
        "",
        f"/healthz peak on the same node in the {size['before']:g} s before each SIGTERM: {before} ms. "
        f"Exit codes: {[f['exit_code'] for f in record['restarts']]}. Refused at the handshake, by kind: "
        f"{[f['failed_connects'] for f in record['restarts']]}; of them HAProxy's own 503s (no node UP): "
        f"{[f['haproxy_503s'] for f in record['restarts']]}.",
    ]
    lines += ["", f"The nodes' settings: {settings}."]
    if record.get("error"):
        lines += ["", f"The run stopped early: {record['error']}"]
    return "\n".join(lines) + "\n"
