"""The Submissions export's records (gateway.core.submission_csv), read as spreadsheets read them: with `,`, `;` or
tab as the separator. No reading finds a cell that starts a formula; the comma reading gets every row and every
text back whole (newlines inside their cells), guarded."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.core.submission import Counts, SubmissionRow
from gateway.core.submission_csv import COLUMNS, FORMULA_START, guard, header, record, row_record

READINGS = [",", ";", "\t"]
# The issue's titles: each a formula for some reading of the export as it was.
ATTACKS = [
    "x;=cmd|' /C calc'!A0;",
    "=1+1",
    "+1+1",
    "-1+1",
    "@SUM(1+1)",
    "\t=1+1",
    "\r=1+1",
    "a title\n=1+1",
    "a title\r\n@SUM(1+1)",
    "x,=1+1",
    "x\t-1+1",
    'x;""=1+1',
    "x; =1+1",
    'say "hi";+1',
]


def submission(i: int, title: str, project: str = "p", priority: int = 0) -> SubmissionRow:
    return SubmissionRow(
        id=i,
        trajectory_id=None,
        user_id=7,
        project=project,
        title=title,
        priority=priority,
        instance_type="",
        cores=4,
        memory_gb=16,
        preemptible=False,
        staging="",
        held=False,
        reviewed=False,
        downloaded=False,
        created_at=datetime(2026, 12, 6, tzinfo=UTC),
        updated_at=None,
        status="pending",
        tasks=0,
        counts=Counts(),
        avg_frame=None,
        version=1,
    )


def export(rows: list[SubmissionRow]) -> str:
    return header() + "".join(row_record(r, {7: "=alice"}) for r in rows)


def read(text: str, separator: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=separator))


def starts_a_formula(cell: str) -> bool:
    try:
        float(cell)  # a number is a number, a minus sign and all
        return False
    except ValueError:
        first = cell.lstrip(" ")[:1]
        return first != "" and first in FORMULA_START


def no_formula_in(text: str, rows: list[SubmissionRow]) -> None:
    for separator in READINGS:
        for line in read(text, separator):
            assert not any(starts_a_formula(cell) for cell in line), (separator, line)
        # Whatever else it splits, every record starts a line of its own, first with its row's id. Read with
        # another separator, a title's line breaks are not inside quotes: a title of two leaves an empty line.
        starts = [line[0].split(",")[0] for line in read(text, separator) if line]
        assert [s for s in starts if s.isdigit()] == [str(r.id) for r in rows], separator


def test_the_issue_s_titles_start_no_formula_in_any_reading() -> None:
    rows = [submission(i + 1, title, project=title, priority=-i) for i, title in enumerate(ATTACKS)]
    text = export(rows)
    no_formula_in(text, rows)
    [head, *lines] = read(text, ",")
    assert head == list(COLUMNS) and len(lines) == len(rows)
    assert [line[4] for line in lines] == [guard(t) for t in ATTACKS]
    assert lines[0][4] == "x;'=cmd|' /C calc'!A0;" and lines[7][4] == "a title\n'=1+1"
    assert lines[0][1] == "'=alice" and lines[2][5] == "-2"  # a member's name is text; a priority a number


def test_every_text_cell_is_quoted_and_numbers_are_bare() -> None:
    assert record([1, "plain", -5, 'a "b"', ""]) == '1,"plain",-5,"a ""b""",""\r\n'


@pytest.mark.parametrize("text", ["Render shot 0001", "1,5 GB; 2 cores", "e-mail: a@b", "50% - done", "x=1"])
def test_text_that_starts_no_formula_is_kept_as_it_is(text: str) -> None:
    assert guard(text) == text


TITLES = st.text(st.one_of(st.sampled_from("=+-@\t\r\n,;\" 'x1"), st.characters()), max_size=40)


@given(titles=st.lists(TITLES, min_size=1, max_size=6))
@example(titles=["\n\n"])  # found by a whole suite, 2026-12-08: the test read an empty line's first cell
def test_any_title_reads_back_whole_and_starts_no_formula(titles: list[str]) -> None:
    rows = [submission(i + 1, t) for i, t in enumerate(titles)]
    text = export(rows)
    no_formula_in(text, rows)
    lines = read(text, ",")[1:]
    assert [line[4] for line in lines] == [guard(t) for t in titles]


def test_the_export_carries_every_column_of_the_page_time_left_included() -> None:
    """The page shows TIME LEFT; the export left it out."""
    waiting = submission(1, "Render shot 0001")
    waiting.eta, waiting.tasks, waiting.counts = 720, 4, Counts(queued=3, completed=1)
    done = submission(2, "Render shot 0002")
    [head, first, second] = read(export([waiting, done]), ",")
    assert head[head.index("PROGRESS") + 1] == "TIME LEFT (S)"
    column = head.index("TIME LEFT (S)")
    assert (first[column], second[column]) == ("720", "")  # seconds while it waits or runs; empty when unknown
