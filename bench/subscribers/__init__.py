"""Websocket subscribers for the load benchmark: thousands of them, cheap enough not to be the bottleneck.

Each subscriber is a raw ``asyncio.Protocol`` websocket client (RFC 6455, ws:// only) on uvloop, with no
websockets library on the hot path: frames are read by gateway.core.wsframe's reader in client mode, and
messages decoded with msgspec into small Structs holding only the fields the benchmark needs. Subscribers
are spread over worker processes (multiprocessing, spawn context) driven by a :class:`Fleet` in the
harness's process over Pipes. The modules, from the wire up:

- ``wsclient``: the websocket client protocol (upgrade, frames, pings, close);
- ``dialects``: how a subscriber speaks to each system (``gateway_dialect`` and ``gateway_wire`` for this
  project's gateway, whose resume protocol is gateway.core.follower's; ``plain``; ``socketio``);
- ``jobstate``: a channel's jobs packed small; ``latency`` and ``counters``: what the subscribers measure;
- ``subscriber``: one client reconnecting by itself; ``worker``: a process of them; ``fleet``: the harness's side.

Compression (``Fleet(deflate=True)``): every subscriber offers permessage-deflate (RFC 7692) as browsers do
(``permessage-deflate; client_max_window_bits``) and sends its own messages uncompressed. A server that answers
``server_no_context_takeover`` (the gateway) has each compressed message inflated with a fresh context; one
that keeps its context (Node ``ws`` by default) with one inflate context per connection. ``bytes`` counts
what came off the socket, compressed.

Latency: receive time (``time.time()`` when the bytes arrived) minus the job's ``updated_at`` (gateway)
or ``t`` (plain, socketio), in milliseconds, recorded in a :class:`Histogram` per worker process (exact
counts per bucket: exact to the microsecond below 256 µs, then 128 buckets per power of two, so a
percentile is within 0.4 % of the true value; count, sum, min and max are exact). Histograms merge by
adding bucket counts; the parent computes the percentiles. Gateway team ``summary`` latency (now - the
newest ``trajectories[].updated_at``) goes to a separate histogram: it includes the 250 ms throttle.

    fleet = Fleet(lambda i: f"ws://127.0.0.1:8000/ws?token={tokens[i % len(tokens)]}", "gateway",
                  lambda i: [f"trajectory:{1 + i % 20}"], n=2000, processes=2, connect_rate=1000)
    await fleet.start()
    await fleet.wait_live(60)
    await fleet.reset_stats()
    ...  # the measured phase
    print(await fleet.stats())
    report = compare_states(await fleet.states(), expected_from_the_database)
    print(await fleet.storm(60))
    await fleet.stop()

The harness's ``__main__`` must guard its entry point with ``if __name__ == "__main__":``: spawned workers
import the main module again.
"""

from .counters import Stats, merge_stats
from .dialects import DIALECTS, make_dialect
from .fleet import Fleet, FleetStates, StateGroup, compare_states
from .latency import Histogram

__all__ = [
    "DIALECTS", "Fleet", "FleetStates", "Histogram", "StateGroup", "Stats", "compare_states", "make_dialect",
    "merge_stats",
]  # fmt: skip
