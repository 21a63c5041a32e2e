"""A person's preferences as every node hears of a change: which finishes reach them (Account: mine, my team's,
none). Chosen in one browser, the choice is announced on the bus (gateway.bus.announcements), and each node tells
that person's open sockets at once (a `preferences` message, docs/protocol.md), so every tab of theirs, on any
node, follows it without a reload.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Finishes = Literal["mine", "team", "none"]  # which finishes reach a person (users.finishes)


class PreferencesChanged(msgspec.Struct, frozen=True, tag_field="type", tag="preferences"):
    """An announcement every node hears, on a channel of its own: `user_id` chose `finishes`."""

    user_id: int
    finishes: Finishes
