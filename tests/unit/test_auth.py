import pytest

from gateway.web.auth import InvalidToken, cluster_of_key, hash_key, issue_token, key_matches, new_cluster_key, verify_token
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


def test_cluster_keys_are_checked_against_their_hash() -> None:
    key, stored = new_cluster_key(7)
    assert cluster_of_key(key) == 7 and stored == hash_key(key) and key not in stored
    assert key_matches(key, stored)
    assert not key_matches(key + "x", stored)
    assert not key_matches(key, None)
    assert cluster_of_key("nonsense") is None


def test_tokens_are_redacted_from_log_lines() -> None:
    line = '127.0.0.1:5 - "WebSocket /ws?token=eyJabc.def.ghi&x=1" [accepted] Authorization: Bearer eyJ.x.y'
    assert redact(line) == '127.0.0.1:5 - "WebSocket /ws?token=[redacted]&x=1" [accepted] Authorization: Bearer [redacted]'


def test_json_log_lines_are_parseable_and_redacted() -> None:
    import json
    import logging

    from gateway.web.logs import JsonLines, RedactSecrets

    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, '%s - "WebSocket %s" [accepted]', ("127.0.0.1:5", "/ws?token=eyJ.a.b"), None)
    RedactSecrets().filter(record)
    line = json.loads(JsonLines().format(record))
    assert line["level"] == "info" and line["logger"] == "uvicorn.error"
    assert line["message"] == '127.0.0.1:5 - "WebSocket /ws?token=[redacted]" [accepted]'
