"""What the Submissions page may ask for, and what the relay hands over to save and to send."""

from __future__ import annotations

import msgspec
import pytest

from gateway.core.aggregate import SubmissionChange
from gateway.core.batching import MAX_ROWS_PER_SUMMARY, Batcher
from gateway.core.submission import SubmissionAggregate, SubmissionRecord
from gateway.core.submission_window import BadWindow, like_pattern, parse_window


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


def test_a_search_is_literal() -> None:
    assert like_pattern("50%_a\\b") == "%50\\%\\_a\\\\b%"


def record(i: int, team_id: int = 1) -> SubmissionRecord:
    return SubmissionRecord(id=i, team_id=team_id, title=f"shot {i}")


def test_rows_taken_for_the_team_channel_are_handed_over_to_save_first() -> None:
    core = Batcher(epoch=1)
    core.apply([SubmissionChange(record=record(1)), SubmissionChange(record=record(2))])
    [publication] = core.take_team_publications(now=10.0)
    sent = msgspec.json.decode(publication.json)["submissions"]
    saved = core.submissions.take_to_save()
    assert [(team, row.id) for team, row, _ in saved] == [(1, 1), (1, 2)]
    assert [msgspec.json.decode(text) for _, _, text in saved] == sent  # the very rows sent, as sent
    assert core.submissions.take_to_save() == []


def test_a_start_sends_only_the_rows_that_differ_from_those_saved() -> None:
    loaded = [SubmissionAggregate(record(i)) for i in (1, 2, 3)]
    unchanged = {i: msgspec.json.encode(a.row()) for i, a in zip((1, 2), loaded, strict=False)}
    unchanged[2] = b"{}"  # saved before a change: sent again
    core = Batcher(epoch=1)
    core.load_submissions(loaded, unchanged)
    [publication] = core.take_team_publications(now=10.0)
    assert [r["id"] for r in msgspec.json.decode(publication.json)["submissions"]] == [2, 3]


def test_more_rows_than_a_message_carries_say_reload_instead() -> None:
    core = Batcher(epoch=1)
    core.apply([SubmissionChange(record=record(i)) for i in range(1, MAX_ROWS_PER_SUMMARY + 2)])
    [publication] = core.take_team_publications(now=10.0)
    message = msgspec.json.decode(publication.json)
    assert message["reload_submissions"] is True and "submissions" not in message
    assert len(core.submissions.take_to_save()) == MAX_ROWS_PER_SUMMARY + 1  # every one saved all the same
