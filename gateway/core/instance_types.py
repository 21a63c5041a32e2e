"""Instance types: the kinds of render node a cluster offers, and which of them a selection of submissions may use.

A cluster declares its list (`POST /api/ingest/instance-types`). Edit / Instance Type offers the types that
every cluster holding the selected submissions offers, and the API refuses any other, saying which it offers.
A type of the same name on two clusters is the same type (the first cluster's figures are shown).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated

import msgspec

from .types import Text

Name = Annotated[Text, msgspec.Meta(min_length=1, max_length=64)]


class InstanceType(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One kind of render node: its cores and memory, and whether its nodes may be taken away (preemptible)."""

    name: Name
    cores: Annotated[int, msgspec.Meta(ge=1, le=1024)]
    memory_gb: Annotated[int, msgspec.Meta(ge=1, le=16384)]
    preemptible: bool = False


class InstanceTypes(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /api/ingest/instance-types`: every type this cluster offers, replacing the list it declared before."""

    instance_types: Annotated[list[InstanceType], msgspec.Meta(min_length=1, max_length=100)]


class Offered(msgspec.Struct):
    """The instance types every cluster holding the selected submissions offers, and those clusters' names."""

    instance_types: list[InstanceType]
    clusters: list[str]


def common(offers: Iterable[Mapping[str, InstanceType]]) -> list[InstanceType]:
    """The types offered by every one of `offers` (each a cluster's types by name), in the first one's order."""
    offers = list(offers)
    if not offers:
        return []
    names = set(offers[0])
    for offer in offers[1:]:
        names &= set(offer)
    return [t for name, t in offers[0].items() if name in names]


def refusal(name: str, offered: list[InstanceType], clusters: list[str]) -> str:
    """Why an instance type is refused, naming what is offered."""
    where = f"cluster {clusters[0]}" if len(clusters) == 1 else f"clusters {', '.join(clusters)}"
    if not offered:
        return (
            f"instance_type: {where} offer no instance types in common"
            if len(clusters) > 1
            else (f"instance_type: {where} offers no instance types")
        )
    choices = ", ".join(t.name for t in offered)
    verb = "offers" if len(clusters) == 1 else "offer in common"
    return f"instance_type: {name} is not an instance type of {where} ({verb}: {choices})"
