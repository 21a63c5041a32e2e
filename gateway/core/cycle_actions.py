"""The publish cycle's vocabulary (gateway.core.publish_cycle): the actions the machine asks the relay to carry
out, and the events the relay feeds back with what they gave. Actions and events without fields are made once
(the constants at the end): a cycle allocates none of them."""

from __future__ import annotations

from dataclasses import dataclass

from .aggregate import MembershipsChanged, OwnershipsChanged
from .publication import Publication
from .submission_rows import SavedRow
from .team import ClusterStats, Presence

Extra = tuple[int, Presence | ClusterStats]
Row = SavedRow

# -- actions: what the relay performs, and the event it answers with


@dataclass(frozen=True, slots=True)
class ReadMarkers:
    """Which of these once-only finish markers some relay has published already; answer `MarkersRead`."""

    markers: list[str]


@dataclass(frozen=True, slots=True)
class CollectExtras:
    """Presence and cluster figures that changed (best effort: none on failure); answer `ExtrasCollected`."""


@dataclass(frozen=True, slots=True)
class ReadSeqs:
    """The last sequence published on each channel by any relay (0: none), retried until read; answer `SeqsRead`."""

    channels: list[str]


@dataclass(frozen=True, slots=True)
class SaveRows:
    """Save these submission rows in PostgreSQL (before the messages carrying them go out); answer `Saved`."""

    rows: list[Row]


@dataclass(frozen=True, slots=True)
class ProveLock:
    """Prove the partition's lock is still held; answer `LockProved`. Not `retry`: the cycle's first try, from
    which the relay's patience with the bus runs."""

    retry: bool


@dataclass(frozen=True, slots=True)
class RaiseFence:
    """Raise the partition's fence to this epoch again and take the bus's relay cursor as it is; answer
    `FenceRaised(now)` or `Failed`."""


@dataclass(frozen=True, slots=True)
class Publish:
    """Publish these messages with the outbox cursor they reach (None: no new read), in one fenced call; answer
    `Published`, `Behind` (the bus refused: it holds another relay cursor) or `Failed`."""

    publications: list[Publication]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class Wait:
    """Sleep this long before trying again; answer `Waited`."""

    seconds: float


@dataclass(frozen=True, slots=True)
class CheckBus:
    """Whether the bus lost what this relay published; answer `BusChecked` (or `Failed`: taken as not)."""


@dataclass(frozen=True, slots=True)
class RecordClosed:
    """These waves' finishes went out: record them closed; answer `Recorded`."""

    waves: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Announce:
    """Send this membership (or ownership) announcement to every node, retried until sent; answer `Announced`."""

    announcement: MembershipsChanged | OwnershipsChanged


@dataclass(frozen=True, slots=True)
class Done:
    """The cycle is over."""


Action = (
    ReadMarkers
    | CollectExtras
    | ReadSeqs
    | SaveRows
    | ProveLock
    | RaiseFence
    | Publish
    | Wait
    | CheckBus
    | RecordClosed
    | Announce
    | Done
)

# -- events: what performing an action gave


@dataclass(frozen=True, slots=True)
class MarkersRead:
    published: set[str]


@dataclass(frozen=True, slots=True)
class ExtrasCollected:
    extras: list[Extra]


@dataclass(frozen=True, slots=True)
class SeqsRead:
    seqs: dict[str, int]


@dataclass(frozen=True, slots=True)
class Saved:
    pass


@dataclass(frozen=True, slots=True)
class LockProved:
    pass


@dataclass(frozen=True, slots=True)
class FenceRaised:
    now: float  # the relay's monotonic clock once the bus answered: the teams' state is sent as of then


@dataclass(frozen=True, slots=True)
class Published:
    pass


@dataclass(frozen=True, slots=True)
class Behind:
    """The bus no longer holds what this relay published (a restart, a failover to a replica behind)."""


@dataclass(frozen=True, slots=True)
class Failed:
    """The bus did not take the call (away, refusing, cut off): what was sent is kept for the next try."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class Waited:
    pass


@dataclass(frozen=True, slots=True)
class BusChecked:
    behind: bool


@dataclass(frozen=True, slots=True)
class Recorded:
    pass


@dataclass(frozen=True, slots=True)
class Announced:
    pass


Event = (
    MarkersRead
    | ExtrasCollected
    | SeqsRead
    | Saved
    | LockProved
    | FenceRaised
    | Published
    | Behind
    | Failed
    | Waited
    | BusChecked
    | Recorded
    | Announced
)

# The actions and events without fields, made once: a cycle allocates none of them.
COLLECT_EXTRAS, RAISE_FENCE, CHECK_BUS, DONE = CollectExtras(), RaiseFence(), CheckBus(), Done()
FIRST_PROOF, RETRY_PROOF = ProveLock(retry=False), ProveLock(retry=True)
SAVED, LOCK_PROVED, PUBLISHED, BEHIND = Saved(), LockProved(), Published(), Behind()
WAITED, RECORDED, ANNOUNCED = Waited(), Recorded(), Announced()
NOT_BEHIND, FOUND_BEHIND = BusChecked(False), BusChecked(True)
