"""What a trusted proxy says of the client (gateway.web.server.proxy): believed from the trusted addresses only, each
address's answer decided once and kept within a bound."""

from __future__ import annotations

from gateway.web.server.proxy import DECIDED, Proxies


def scope(client: str, *headers: tuple[bytes, bytes]) -> dict[str, object]:
    return {"type": "http", "scheme": "http", "client": (client, 5000), "headers": list(headers)}


def test_only_a_trusted_address_names_the_client_and_asking_again_answers_the_same() -> None:
    proxies = Proxies("10.0.0.0/8, proxy.sock")
    for _ in range(2):  # the second time from what was decided the first
        assert [proxies.trusts(h) for h in ("10.1.2.3", "11.1.2.3", "proxy.sock", "not an address")] == [
            True,
            False,
            True,
            False,
        ]
        trusted = scope("10.0.0.1", (b"x-forwarded-for", b"203.0.113.9, 10.0.0.7"), (b"x-forwarded-proto", b"https"))
        proxies.apply(trusted)
        assert (trusted["client"], trusted["scheme"]) == (("203.0.113.9", 0), "https")
        untrusted = scope("192.0.2.1", (b"x-forwarded-for", b"203.0.113.9"))
        proxies.apply(untrusted)
        assert untrusted["client"] == ("192.0.2.1", 5000)


def test_what_is_kept_is_bounded() -> None:
    proxies = Proxies("127.0.0.1")
    for n in range(DECIDED + 10):
        assert not proxies.trusts(f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}")
    assert not proxies.trusts("x" * 1000)
    assert 0 < len(proxies._decided) <= DECIDED and "x" * 1000 not in proxies._decided
    assert proxies.trusts("127.0.0.1")
