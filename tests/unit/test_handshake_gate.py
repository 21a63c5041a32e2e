"""What a websocket upgrade passes before any websocket work (gateway.web.websocket.handshake_gate): the token the app
would read, valid, then the admission at its user's share."""

from __future__ import annotations

from gateway.core.admission import Admission
from gateway.credentials import VerifiedTokens, issue_token
from gateway.web.websocket.handshake_gate import HandshakeGate, token_in

SECRET = "s" * 32


def gate(rate: float = 1000, share: float = 0.05) -> HandshakeGate:
    return HandshakeGate(Admission(rate, share), VerifiedTokens(SECRET), max_age=3600)


def test_the_token_is_read_where_the_app_reads_it() -> None:
    assert token_in([(b"authorization", b"Bearer abc ")], b"/ws?token=q") == "abc"
    assert token_in([(b"authorization", b"Basic x")], b"/ws?a=1&token=q%2Bz") == "q+z"
    assert token_in([(b"cookie", b"a=1; gateway_token=c")], b"/ws?tok%65n=q") == "c"  # the name spelled exactly
    assert token_in([], b"/ws?token=") is None
    assert token_in([(b"authorization", b"Basic x"), (b"authorization", b"Bearer second")], b"/ws") is None


def test_an_upgrade_without_a_valid_token_is_refused_and_spends_no_admission() -> None:
    checked = gate(rate=20)
    for headers in ([], [(b"authorization", b"Bearer forged")], [(b"cookie", b"gateway_token=")]):
        refusal = checked.check(headers, b"/ws", 0.0, 0.5)
        assert refusal is not None and (refusal.status, refusal.code) == (401, "unauthorized")
    expired = issue_token(SECRET, 7, -10)
    refusal = checked.check([(b"authorization", b"Bearer " + expired.encode())], b"/ws", 0.0, 0.5)
    assert refusal is not None and refusal.message == "token expired"
    assert checked.admission.bucket.tokens == checked.admission.bucket.burst  # untouched
    assert checked.admission.refused_total == 0


def test_a_signed_upgrade_is_admitted_within_its_user_s_share() -> None:
    checked = gate(rate=1000, share=0.01)  # 10 a second, bursts of 10
    token = issue_token(SECRET, 7, 3600).encode()
    verdicts = [checked.check([(b"authorization", b"Bearer " + token)], b"/ws", 0.0, 0.5) for _ in range(11)]
    assert verdicts[:10] == [None] * 10
    last = verdicts[10]
    assert last is not None and (last.status, last.code) == (503, "busy") and last.retry_after_ms is not None
    other = issue_token(SECRET, 8, 3600).encode()
    assert checked.check([], b"/ws?token=" + other, 0.0, 0.5) is None  # another user's share is their own


def test_a_cluster_s_feed_passes_to_the_app_at_the_clusters_own_admission() -> None:
    """A cluster opens its command feed with its key, which only the app can check against the stored hash: the
    gate lets it through at the clusters' own rate, and a flood of made-up keys spends nothing of the people's."""
    checked = gate(rate=20)
    assert checked.check([(b"authorization", b"Bearer c3.secret")], b"/ws", 0.0, 0.5) is None
    flood = [checked.check([(b"authorization", f"Bearer c{i}.x".encode())], b"/ws", 0.0, 0.5) for i in range(1, 501)]
    refused = [r for r in flood if r is not None]
    assert refused and all((r.status, r.code) == (503, "busy") for r in refused)
    assert checked.admission.bucket.tokens == checked.admission.bucket.burst  # the people's admission untouched
    token = issue_token(SECRET, 7, 3600).encode()
    assert checked.check([(b"authorization", b"Bearer " + token)], b"/ws", 0.0, 0.5) is None
