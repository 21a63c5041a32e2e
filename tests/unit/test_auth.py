import jwt
import pytest

from gateway.web.auth import (
    InvalidToken,
    cluster_of_key,
    hash_key,
    issue_token,
    key_matches,
    new_cluster_key,
    read_token,
    verify_token,
)
from gateway.web.logs import redact

SECRET = "s" * 40


def test_token_round_trip() -> None:
    assert verify_token(SECRET, issue_token(SECRET, 42, 60)) == 42


def test_expired_forged_and_malformed_tokens_are_refused() -> None:
    with pytest.raises(InvalidToken, match="token expired"):
        verify_token(SECRET, issue_token(SECRET, 1, -5))
    with pytest.raises(InvalidToken, match="invalid token"):
        verify_token(SECRET, issue_token("t" * 40, 1, 60))
    for garbage in ("", "abc", "a.b.c"):
        with pytest.raises(InvalidToken, match="invalid token"):
            verify_token(SECRET, garbage)


def test_a_token_names_its_session_and_a_renewal_keeps_it() -> None:
    first = read_token(SECRET, issue_token(SECRET, 42, 60, started=1000.0))
    assert first.user_id == 42 and first.token_id and first.started == 1000.0
    renewed = read_token(SECRET, issue_token(SECRET, 42, 120, token_id=first.token_id, started=first.started))
    assert (renewed.token_id, renewed.started) == (first.token_id, 1000.0) and renewed.expires > first.expires
    assert read_token(SECRET, issue_token(SECRET, 42, 60)).token_id != first.token_id


def test_a_session_older_than_the_maximum_age_is_refused_however_fresh_its_token() -> None:
    old = issue_token(SECRET, 1, 3600, started=1000.0)
    with pytest.raises(InvalidToken, match="session too old"):
        read_token(SECRET, old, max_age=7 * 86400)
    assert read_token(SECRET, old).user_id == 1  # without a maximum (tools reading their own token)


def test_tokens_from_before_session_ids_still_work_and_started_when_issued() -> None:
    legacy = jwt.encode({"sub": "5", "iat": 1000, "exp": 2**40}, SECRET, algorithm="HS256")
    claims = read_token(SECRET, legacy)
    assert (claims.user_id, claims.token_id, claims.started) == (5, "", 1000.0)


def test_cluster_keys_are_checked_against_their_hash() -> None:
    key, stored = new_cluster_key(7)
    assert cluster_of_key(key) == 7 and stored == hash_key(key) and key not in stored
    assert key_matches(key, stored)
    assert not key_matches(key + "x", stored)
    assert not key_matches(key, None)
    assert cluster_of_key("nonsense") is None


def test_tokens_are_redacted_from_log_lines() -> None:
    line = '127.0.0.1:5 - "WebSocket /ws?token=eyJabc.def.ghi&x=1" [accepted] Authorization: Bearer eyJ.x.y'
    assert (
        redact(line) == '127.0.0.1:5 - "WebSocket /ws?token=[redacted]&x=1" [accepted] Authorization: Bearer [redacted]'
    )


def test_percent_encoded_names_and_bare_tokens_are_redacted_too() -> None:
    token = issue_token(SECRET, 1, 60)
    assert redact(f'"GET /?tok%65n={token}&x=1 HTTP/1.1" 200') == '"GET /?tok%65n=[redacted]&x=1 HTTP/1.1" 200'
    assert redact(f'"GET /ws?%74oken={token}"') == '"GET /ws?%74oken=[redacted]"'
    assert token not in redact(f"/ws?t={token}") and token not in redact(f"/ws?token%3D{token}")
    assert redact("GET /api/teams/3/members?page=2") == "GET /api/teams/3/members?page=2"


def test_json_log_lines_are_parseable_and_redacted() -> None:
    import json
    import logging

    from gateway.web.logs import JsonLines, RedactSecrets

    record = logging.LogRecord(
        "uvicorn.error",
        logging.INFO,
        __file__,
        1,
        '%s - "WebSocket %s" [accepted]',
        ("127.0.0.1:5", "/ws?token=eyJ.a.b"),
        None,
    )
    RedactSecrets().filter(record)
    line = json.loads(JsonLines().format(record))
    assert line["level"] == "info" and line["logger"] == "uvicorn.error"
    assert line["message"] == '127.0.0.1:5 - "WebSocket /ws?token=[redacted]" [accepted]'
