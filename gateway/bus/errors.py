"""The bus's own errors: what callers of the broker catch, whichever implementation (Redis or memory) is behind it.

    BusError
    ├── BusUnavailable   the bus did not answer: a connection lost, refused or timed out, a subscription not
    │                    confirmed in time (also a ConnectionError, as a socket's own errors are)
    ├── BusRefused       the bus answered, and refused: out of memory, a script's error, a key of the wrong type
    ├── Fenced           a newer relay has taken the partition over
    └── BusBehind        the bus no longer holds what this relay published

Nothing outside gateway/bus/ sees redis-py's exceptions: the Redis modules translate them at their boundary
(gateway.bus.translate), and the memory broker raises these directly. A caller tells the two failures apart by
what they say about the link: after `BusRefused` Redis is there (retrying will not reconnect anything), after
`BusUnavailable` it may not be.
"""

from __future__ import annotations

__all__ = ["BusBehind", "BusError", "BusRefused", "BusUnavailable", "Fenced"]


class BusError(Exception):
    """Anything the bus could not do."""


class BusUnavailable(BusError, ConnectionError):
    """The bus did not answer: its message says why (the driver's words), never a password."""


class BusRefused(BusError):
    """The bus answered with a refusal; its message is the server's."""


class Fenced(BusError):
    """A newer relay has taken over: this one must stop publishing."""


class BusBehind(BusError):
    """The bus no longer holds what this relay published (it failed over to a replica behind, or restarted): the
    cycle wrote nothing; take over again and send every team's whole state with it."""
