"""What the Submissions page may ask for, and what the relay hands over to save and to send."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core.aggregate import SubmissionChange
from gateway.core.batching import MAX_ROWS_PER_SUMMARY, Batcher
from gateway.core.submission import SubmissionAggregate, SubmissionRecord
from gateway.core.submission_rows import row_digest
from gateway.core.submission_window import BadWindow, like_pattern, parse_page, parse_window, words_query


def test_a_window_from_its_query() -> None:
    w = parse_window({"sort": ["priority"], "status": ["running", "failed"], "q": [" shot "], "offset": ["200"]})
    assert (w.column, w.descending, w.statuses, w.search, w.offset, w.limit) == (
        "priority",
        False,
        ("running", "failed"),
        "shot",
        200,
        100,
    )
    newest = parse_window({})
    assert (newest.sort, newest.descending) == ("created_at", True)
    assert parse_window({"sort": ["user"]}).column == "user_name"


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"sort": ["id desc; drop table jobs"]}, "sort"),
        ({"dir": ["up"]}, "dir"),
        ({"limit": ["0"]}, "limit"),
        ({"limit": ["501"]}, "limit"),
        ({"offset": ["-5"]}, "offset"),
        ({"status": ["done"]}, "status"),
        ({"user": ["1e3"]}, "user"),
        ({"project": [str(i) for i in range(21)]}, "project"),
    ],
)
def test_a_bad_window_names_its_parameter(params: dict[str, list[str]], name: str) -> None:
    with pytest.raises(BadWindow) as refused:
        parse_window(params)
    assert refused.value.parameter == name and str(refused.value).startswith(f"{name}: ")


# Digits of every script, superscripts, fractions and circled numbers (str.isdigit() takes some of them, int()
# refuses some and reads others as another script's number), mixed with ASCII digits and signs.
UNICODE_DIGITS = st.text(
    st.one_of(st.characters(categories=["Nd", "No", "Nl"]), st.sampled_from("0123456789+- _")), min_size=1
)
NUMERIC = [(parse_window, "offset"), (parse_window, "limit"), (parse_window, "user"), (parse_page, "offset")]
NUMERIC += [(parse_page, "limit")]


@pytest.mark.parametrize(("parse", "name"), NUMERIC, ids=lambda v: getattr(v, "__name__", v))
@given(text=UNICODE_DIGITS)
def test_a_number_is_ascii_digits_and_anything_else_is_refused_naming_its_parameter(
    parse: object, name: str, text: str
) -> None:
    assert callable(parse)
    try:
        parse({name: [text]})
    except BadWindow as refused:
        assert refused.parameter == name
    else:
        assert text.isascii() and text.isdigit()


@given(text=UNICODE_DIGITS)
def test_a_search_of_any_digits_is_text_and_an_id_only_in_ascii(text: str) -> None:
    window = parse_window({"q": [text]})
    assert window.search == text.strip()
    if window.search_id is not None:
        assert window.search.isascii() and int(window.search) == window.search_id


@pytest.mark.parametrize("text", ["\u00b2", "1\u00b2", "\u0661", "\uff11", "9" * 5000, "1_0", " 7", "+1"])
def test_what_int_refuses_or_reads_otherwise_is_no_offset(text: str) -> None:
    with pytest.raises(BadWindow, match="^offset: "):
        parse_window({"offset": [text]})


def test_a_search_is_literal() -> None:
    assert like_pattern("50%_a\\b") == "%50\\%\\_a\\\\b%"


def test_a_search_is_its_words_the_last_one_begun() -> None:
    assert words_query("Copper gra") == "'Copper' & 'gra':*"
    assert words_query("sq020_sh0450, v01!") == "'sq020' & 'sh0450' & 'v01':*"  # punctuation separates
    assert words_query("50%") == "'50':*"
    assert words_query(" %_'\\ ") is None  # no letter or digit: no text to find


@given(text=st.text(max_size=200))
def test_no_search_can_break_out_of_its_words(text: str) -> None:
    query = words_query(text)
    if query is not None:
        for word in query.removesuffix(":*").split(" & "):
            assert word.startswith("'") and word.endswith("'") and word[1:-1].isalnum()


def record(i: int, team_id: int = 1) -> SubmissionRecord:
    return SubmissionRecord(id=i, team_id=team_id, title=f"shot {i}")


def test_rows_taken_for_the_team_channel_are_handed_over_to_save_first() -> None:
    core = Batcher(epoch=1)
    core.apply([SubmissionChange(record=record(1)), SubmissionChange(record=record(2))])
    [publication] = core.take_team_publications(now=10.0)
    sent = msgspec.json.decode(publication.json)["submissions"]
    saved = core.submissions.take_to_save()
    assert [(s.team_id, s.row.id) for s in saved] == [(1, 1), (1, 2)]
    assert [msgspec.json.decode(s.json) for s in saved] == sent  # the very rows sent, as sent
    assert core.submissions.take_to_save() == []


def test_a_start_sends_only_the_rows_that_differ_from_those_saved() -> None:
    loaded = [SubmissionAggregate(record(i)) for i in (1, 2, 3)]
    unchanged = {i: row_digest(msgspec.json.encode(a.row())) for i, a in zip((1, 2), loaded, strict=False)}
    unchanged[2] = row_digest(b"{}")  # saved before a change: sent again
    core = Batcher(epoch=1)
    core.load_submissions((a, unchanged.get(a.record.id)) for a in loaded if a.record is not None)
    [publication] = core.take_team_publications(now=10.0)
    assert [r["id"] for r in msgspec.json.decode(publication.json)["submissions"]] == [2, 3]


def test_more_rows_than_a_message_carries_say_reload_instead() -> None:
    core = Batcher(epoch=1)
    core.apply([SubmissionChange(record=record(i)) for i in range(1, MAX_ROWS_PER_SUMMARY + 2)])
    [publication] = core.take_team_publications(now=10.0)
    message = msgspec.json.decode(publication.json)
    assert message["reload_submissions"] is True and "submissions" not in message
    assert len(core.submissions.take_to_save()) == MAX_ROWS_PER_SUMMARY + 1  # every one saved all the same
