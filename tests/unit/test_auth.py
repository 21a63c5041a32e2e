import time

import jwt
import pytest

from gateway.credentials import CLOCK_SKEW, VerifiedTokens
from gateway.web.node.logs import redact
from gateway.web.people.auth import (
    InvalidToken,
    cluster_of_key,
    hash_key,
    issue_token,
    key_matches,
    new_cluster_key,
    read_token,
    verify_token,
)

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


def forge(now: float, **claims: object) -> str:
    """A token signed with the right secret whose claims are set by hand: what only a holder of the secret
    could make, and the verification must still refuse when they make no sense."""
    return jwt.encode({"sub": "5", "iat": int(now), "exp": int(now) + 3600, **claims}, SECRET, algorithm="HS256")


def test_a_session_started_in_the_future_is_refused_beyond_the_clock_skew() -> None:
    now = time.time()
    for started in (now + CLOCK_SKEW + 5, now + 86400 * 365):
        with pytest.raises(InvalidToken, match="token issued in the future"):
            read_token(SECRET, forge(now, auth_time=int(started)), max_age=7 * 86400)
    # Another node's clock may run a little ahead of this one's.
    assert read_token(SECRET, forge(now, auth_time=int(now) + 30), max_age=7 * 86400).started == int(now) + 30


def test_a_token_issued_in_the_future_is_refused_beyond_the_clock_skew() -> None:
    now = time.time()
    with pytest.raises(InvalidToken, match="token issued in the future"):
        read_token(SECRET, forge(now, iat=int(now + CLOCK_SKEW + 5), auth_time=int(now)))
    with pytest.raises(InvalidToken, match="token issued in the future"):  # and so its session, without auth_time
        read_token(SECRET, forge(now, iat=int(now) + 3600, exp=int(now) + 7200))
    assert read_token(SECRET, forge(now, iat=int(now) + 30)).user_id == 5


@pytest.mark.parametrize(
    "sub",
    ["1_0", " 7", "7 ", "7\n", "+7", "-7", "07", "0", "", "\u0663", "1e3", "0x10", str(2**63), str(2**70)],
)
def test_a_subject_that_is_not_the_canonical_spelling_of_an_id_is_refused(sub: str) -> None:
    with pytest.raises(InvalidToken, match="^invalid token$"):
        read_token(SECRET, forge(time.time(), sub=sub))


def test_the_largest_id_is_a_subject() -> None:
    assert read_token(SECRET, forge(time.time(), sub=str(2**63 - 1))).user_id == 2**63 - 1


@pytest.mark.parametrize(
    "claims",
    [
        {"auth_time": float("nan")},
        {"auth_time": float("-inf")},
        {"auth_time": "1000"},
        {"auth_time": True},
        {"auth_time": None},
        {"auth_time": 10**400},
        {"exp": 10**400},
        {"jti": {"not": "text"}},
    ],
    ids=["nan", "minus-infinity", "text", "bool", "null", "huge", "huge-exp", "jti-object"],
)
def test_claims_that_are_not_what_they_say_are_refused(claims: dict[str, object]) -> None:
    with pytest.raises(InvalidToken, match="^invalid token$"):
        read_token(SECRET, forge(time.time(), **claims), max_age=7 * 86400)


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

    from gateway.web.node.logs import JsonLines, RedactSecrets

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


def test_a_token_verified_once_is_read_from_the_cache_until_it_expires() -> None:
    secret = "s" * 40
    tokens = VerifiedTokens(secret, size=2)
    t0 = float(int(time.time()))
    token = issue_token(secret, 7, ttl=60, now=t0)
    first = tokens.read(token, now=t0)
    assert tokens.read(token, now=t0 + 30) is first  # not verified again
    with pytest.raises(InvalidToken, match="token expired"):
        tokens.read(token, now=t0 + 60)  # its expiry holds, cached or not
    assert len(tokens) == 0


def test_the_cache_keeps_no_invalid_token_and_checks_the_sessions_age_at_every_read() -> None:
    secret = "s" * 40
    tokens = VerifiedTokens(secret, size=2)
    for bad in (issue_token("x" * 40, 7, ttl=60), "not.a.token", issue_token(secret, 7, ttl=-1)):
        with pytest.raises(InvalidToken):
            tokens.read(bad)
    assert len(tokens) == 0
    t0 = float(int(time.time()))
    token = issue_token(secret, 7, ttl=3600, now=t0, started=t0 - 500)
    assert tokens.read(token, max_age=600, now=t0).user_id == 7
    with pytest.raises(InvalidToken, match="session too old"):
        tokens.read(token, max_age=600, now=t0 + 200)


def test_the_cache_holds_at_most_its_size() -> None:
    secret = "s" * 40
    tokens = VerifiedTokens(secret, size=2)
    for user in (1, 2, 3):
        tokens.read(issue_token(secret, user, ttl=60))
    assert len(tokens) == 2
