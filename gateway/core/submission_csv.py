"""The Submissions export's records, without I/O: the page's columns as CSV text that no spreadsheet runs as a
formula, whichever separator it reads the file with.

Every text cell is quoted (a comma, quote or newline in it stays inside its cell for a reader of commas), and
numbers are left bare. Quoting is not enough on its own: a spreadsheet that splits on `;` or tab does not see
these quotes (a record reads to it as `1,"alice","x` up to the first `;`), so a cell starts for it after any `;`,
`,`, tab or line break in a title. Wherever a cell may start, at the text's start or after one of those, text
that would begin a formula (`=`, `+`, `-`, `@`, tab or CR, after any spaces or quotes) is guarded with a leading
apostrophe, which spreadsheets read as "this is text".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .submission import SubmissionRow

# The page's columns, in its order.
COLUMNS = (
    "JOB ID",
    "USER",
    "STATUS",
    "PROJECT",
    "TITLE",
    "PRIORITY",
    "CORES",
    "MEMORY (GB)",
    "PREEMPTIBLE",
    "PROGRESS",
    "TIME LEFT (S)",
    "TASKS",
    "AVG. FRAME (S)",
    "CREATED",
)
FORMULA_START = "=+-@\t\r"
CELL_BREAKS = ",;\t\r\n"  # where a reader of another separator, or one that lost the quoting, starts a cell
_FORMULA_AT_A_CELL_START = re.compile(rf"(^|[{re.escape(CELL_BREAKS)}])(?=[ \"]*[{re.escape(FORMULA_START)}])")

Cell = str | int


def guard(text: str) -> str:
    """`text` with an apostrophe wherever a cell may start with a formula."""
    return _FORMULA_AT_A_CELL_START.sub(r"\1'", text)


def record(cells: Sequence[Cell]) -> str:
    """One CSV record, CRLF-ended (RFC 4180): numbers bare, text guarded and quoted."""
    return ",".join(str(c) if isinstance(c, int) else '"' + guard(c).replace('"', '""') + '"' for c in cells) + "\r\n"


def header() -> str:
    return record(COLUMNS)


def cells(row: SubmissionRow, names: Mapping[int, str]) -> list[Cell]:
    """One row as the page shows it (progress as the completed share; time left in seconds while its tasks wait
    or run, empty when unknown or done; created in ISO 8601)."""
    progress = f"{row.counts.completed}/{row.tasks}" if row.tasks else ""
    return [
        row.id,
        names.get(row.user_id, f"#{row.user_id}") if row.user_id is not None else "",
        row.status,
        row.project,
        row.title,
        row.priority,
        row.cores,
        row.memory_gb,
        "yes" if row.preemptible else "no",
        progress,
        "" if row.eta is None else row.eta,
        row.tasks,
        "" if row.avg_frame is None else f"{row.avg_frame:.1f}",
        row.created_at.isoformat() if row.created_at else "",
    ]


def row_record(row: SubmissionRow, names: Mapping[int, str]) -> str:
    """A row of the export."""
    return record(cells(row, names))
