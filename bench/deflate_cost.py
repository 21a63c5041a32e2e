"""What permessage-deflate costs the node, away from the network: the numbers behind gateway.core.wsframe's
compression settings, and the hub's fan-out with and without compressing subscribers.

    python -m bench.deflate_cost [--subscribers 1000] [--rounds 5]

1. Messages by size, as the node encodes them (job batches of 1 to 500 jobs, the node's own small
   messages): bytes saved by deflating each on its own, and the CPU it takes, at the shared frames' level
   (SHARED_LEVEL) and the fast one (PRIVATE_LEVEL). Where the saving stops paying is DEFLATE_MIN.
2. The hub handing one shared frame to C subscribers (`Hub.deliver`, the socket's write a C no-op): ns per
   subscriber for plain subscribers, for compressing ones (the message deflated once, the same bytes to
   all), and half and half. The plain path must not pay for the compressing one.

Rounds take the fastest (least disturbed) timing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime

from gateway.core.model import Job
from gateway.core.protocol import Batch, Error, Pong, Resync, encode_both, make_cursor
from gateway.core.wsframe import DEFLATE_MIN, PRIVATE_LEVEL, SHARED_LEVEL, Frame, deflate
from gateway.hub.connection import Connection
from gateway.hub.hub import Hub

NOW = datetime(2026, 11, 29, 17, 32, 19, tzinfo=UTC)
KINDS = [
    ("preprocess", "Preprocess trajectory frame"),
    ("analysis", "Radial Distribution Function"),
    ("rasterize", "Rasterize frame preview"),
    ("analysis", "Polyhedral Template Matching"),
]
STATUSES = ["queued", "running", "completed", "failed"]


def job(i: int) -> Job:
    kind, name = KINDS[i % len(KINDS)]
    status = STATUSES[i * 7 % len(STATUSES)]
    return Job(
        id=10_000 + i,
        team_id=1,
        trajectory_id=42,
        cluster_id=3,
        kind=kind,
        name=name,
        status=status,
        version=1 + i % 5,
        frame=i // 3,
        timestep=(i // 3) * 0.5,
        analysis_id=8 if kind == "analysis" else None,
        error="cutoff radius must be positive" if status == "failed" else None,
        created_at=NOW,
        updated_at=NOW,
        started_at=NOW if status != "queued" else None,
        finished_at=NOW if status in ("completed", "failed") else None,
    )


def messages() -> list[bytes]:
    out = [
        encode_both(
            Batch(
                channel="trajectory:42", seq=1187 + n, cursor=make_cursor(3, 1187 + n), jobs=[job(i) for i in range(n)]
            )
        )[0]
        for n in (1, 2, 3, 5, 10, 20, 50, 100, 200, 500)
    ]
    out += [
        encode_both(m)[0]
        for m in (
            Pong(time=1795973539844, id=7),
            Resync(channel="trajectory:42", reason="slow_consumer"),
            Error(code="bad_message", message="Invalid value 'explode' - at `$.type`"),
        )
    ]
    out.append(b'{"type":"glow","channel":"team:7","seq":17,"cursor":"3-17","trajectory_id":42,"wave":7}')
    out.append(
        b'{"type":"notice","channel":"trajectory:42","seq":1190,"cursor":"3-1190","trajectory_id":42,"wave":7,'
        b'"title":"Analysis completed successfully!","level":"success"}'
    )
    return sorted(out, key=len)


def best(fn: object, rounds: int, reps: int) -> float:
    """Seconds per call, the fastest of `rounds`."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(reps):
            fn()  # type: ignore[operator]
        times.append((time.perf_counter() - started) / reps)
    return min(times)


def sizes(rounds: int) -> None:
    print(f"1. Deflating one message on its own (DEFLATE_MIN = {DEFLATE_MIN}: smaller ones go uncompressed)\n")
    print(
        f"| message | bytes | deflated (level {SHARED_LEVEL}) | saved | µs (level {SHARED_LEVEL}) | deflated (level {PRIVATE_LEVEL}) | µs (level {PRIVATE_LEVEL}) |"
    )
    print("|---|---|---|---|---|---|---|")
    for data in messages():
        kind = data[9 : data.index(b'"', 9)].decode()
        shared, fast = deflate(data, level=SHARED_LEVEL), deflate(data, level=PRIVATE_LEVEL)
        t_shared = best(lambda: deflate(data, level=SHARED_LEVEL), rounds, 200)  # noqa: B023  (called at once, inside the loop)
        t_fast = best(lambda: deflate(data, level=PRIVATE_LEVEL), rounds, 200)  # noqa: B023  (called at once, inside the loop)
        print(
            f"| {kind} | {len(data):,} | {len(shared):,} | {1 - len(shared) / len(data):.0%} | {t_shared * 1e6:.1f} | "
            f"{len(fast):,} | {t_fast * 1e6:.1f} |"
        )


class _Link:
    """A link the hub writes straight to; its write is a C function, as a uvloop transport's is."""

    writable = True

    def __init__(self, deflate: int) -> None:
        self.deflate = deflate
        self.write_wire = len

    def write(self, frame: Frame) -> None:
        pass

    def wake(self) -> None:
        pass

    def close(self, code: int, reason: str) -> None:
        pass

    def ping(self, wire: bytes, token: bytes) -> None:
        pass


def fanout(subscribers: int, rounds: int) -> None:
    data = encode_both(Batch(channel="trajectory:42", seq=1, cursor=make_cursor(3, 1), jobs=[job(i) for i in range(5)]))
    print(
        f"\n2. The hub's fan-out of one {len(data[0]):,}-byte batch to C = {subscribers:,} subscribers (ns per subscriber)\n"
    )
    print("| subscribers | ns per subscriber (median of rounds, fastest in brackets) |")
    print("|---|---|")
    for label, compressing in (("plain", 0.0), ("compressing", 1.0), ("half and half", 0.5)):
        hub = Hub()
        for i in range(subscribers):
            conn = Connection(1, "json", 1 << 20, link=_Link(15 if i < subscribers * compressing else 0))  # type: ignore[arg-type]
            conn.refresh()
            hub.add(conn, "trajectory:42")
        seq = iter(range(1, 1 << 30))
        per = [
            best(lambda: hub.deliver("trajectory:42", next(seq), data[0], data[1]), 1, 50) / subscribers  # noqa: B023  (called at once)
            for _ in range(rounds)
        ]
        print(f"| {label} | {statistics.median(per) * 1e9:.0f} ({min(per) * 1e9:.0f}) |")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.deflate_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes(args.rounds)
    fanout(args.subscribers, args.rounds)


if __name__ == "__main__":
    main()
