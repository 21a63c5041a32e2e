"""The Submissions page's named views, without I/O: what a view holds (filters, sort, the columns shown in their
order and widths) and who may change one.

A view names columns by the page's keys; the columns it leaves out are hidden. The CSV export keeps every column
whatever a view shows (a spreadsheet is where a person picks columns again), so a view changes only the page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, get_args

import msgspec

from .submission import SUBMISSION_STATUSES
from .submission_window import MAX_SEARCH, SORT_COLUMNS
from .types import Id

MAX_NAME = 80
MAX_VIEWS = 100  # a person's own views in a team: a bound on what one list answers
MIN_WIDTH, MAX_WIDTH = 40, 800  # px: a handle cannot make a column vanish or push the table off any screen
EDITORS = ("owner", "admin")  # roles that may change a view shared by someone else

# The page's columns, in their default order (frontend/js/submissions.js holds the same keys).
ColumnKey = Literal[
    "id",
    "user",
    "status",
    "project",
    "title",
    "priority",
    "cores",
    "memory_gb",
    "preemptible",
    "progress",
    "eta",
    "tasks",
    "avg_frame",
    "created_at",
]
COLUMN_KEYS: tuple[str, ...] = get_args(ColumnKey)
if TYPE_CHECKING:
    SortKey = str
    Status = str
else:  # the decoder checks these against the lists the rest of the page uses
    SortKey = Literal[tuple(SORT_COLUMNS)]
    Status = Literal[tuple(SUBMISSION_STATUSES)]
# A name shows on one line of the views menu: no control characters, and at least one that is not a space.
_NAME = r"^[^\x00-\x1f\x7f]*[^\x00-\x20\x7f][^\x00-\x1f\x7f]*$"
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME, pattern=_NAME)]
Filter = Annotated[str, msgspec.Meta(max_length=MAX_SEARCH, pattern=r"^[^\x00]*$")]
Width = Annotated[int, msgspec.Meta(ge=MIN_WIDTH, le=MAX_WIDTH)]


class Column(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A shown column; `width` in CSS pixels, or null for the page's own width."""

    key: ColumnKey
    width: Width | None = None


class Filters(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The page's filters as its address holds them: empty for none."""

    status: Status | Literal[""] = ""
    project: Filter = ""
    user: Id | None = None
    q: Filter = ""


class ViewState(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What a view restores: filters, sort and the shown columns in order (at least one, each once)."""

    filters: Filters = msgspec.field(default_factory=Filters)
    sort: SortKey = "created_at"
    dir: Literal["asc", "desc"] = "desc"
    columns: Annotated[list[Column], msgspec.Meta(min_length=1, max_length=len(COLUMN_KEYS))]


class ViewIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A view to save: its name, whether the team sees it, whether it is the sender's default."""

    name: Name
    shared: bool = False
    default: bool = False
    view: ViewState


class OrderIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The sender's order of the views they see in the team, first to last (each id once). Ids of views they do
    not see, or that are gone, are passed over; views left out follow, by name."""

    view_ids: Annotated[list[Id], msgspec.Meta(max_length=MAX_VIEWS * 10)]


class DefaultIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The view the page opens on for the sender: null for the page's own filters and columns."""

    view_id: Id | None


class SavedView(msgspec.Struct, kw_only=True):
    """A saved view as the page lists it: `mine` when the caller wrote it, `editable` when the caller may change
    it (its author, or an owner or admin of the team for a shared one), `default` when it is the caller's."""

    id: int
    name: str
    shared: bool
    default: bool
    mine: bool
    editable: bool
    author: str
    view: ViewState


class SavedViews(msgspec.Struct):
    """The views a member sees in a team: their own and those shared with the team, in the member's own order
    (PUT .../views/order), those it does not place by name."""

    views: list[SavedView]


def problem(view: ViewIn) -> str | None:
    """What is wrong with a view the decoder let through: a column shown twice."""
    keys = [c.key for c in view.view.columns]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            return f"view.columns[{i}].key: {key} is shown already"
    return None


def order_problem(order: OrderIn) -> str | None:
    """What is wrong with an order the decoder let through: a view named twice."""
    for i, view_id in enumerate(order.view_ids):
        if view_id in order.view_ids[:i]:
            return f"view_ids[{i}]: {view_id} is placed already"
    return None


def may_change(author_id: int, shared: bool, caller_id: int, caller_role: str) -> bool:
    """Whether a caller may change or delete a view: its author always; a shared view also an owner or admin."""
    return caller_id == author_id or shared and caller_role in EDITORS


def visible(author_id: int, shared: bool, caller_id: int) -> bool:
    """A private view is its author's alone: another member gets the same 404 as for a view that does not exist."""
    return shared or author_id == caller_id
