"""The checks of gateway.web.http.guards that need no server: where a browser's request comes from, and which
query parameter is a token."""

from types import SimpleNamespace

import pytest
from starlette.requests import Request

from gateway.config import Settings
from gateway.web.http.guards import Refused, query_token, same_origin
from gateway.web.runtime import Runtime

HOST = "gateway.example:8000"


def request(origins: tuple[str, ...], origin: str | None = None, query: bytes = b"") -> Request:
    runtime = SimpleNamespace(settings=Settings(origins=origins))
    runtime.origin_allowed = lambda o, s, h: Runtime.origin_allowed(runtime, o, s, h)  # type: ignore[arg-type]
    headers = [(b"host", HOST.encode())] + ([(b"origin", origin.encode())] if origin is not None else [])
    scope = {
        "type": "http",
        "scheme": "https",  # the node behind TLS (or a trusted proxy that says so)
        "path": "/",
        "headers": headers,
        "query_string": query,
        "app": SimpleNamespace(state=SimpleNamespace(runtime=runtime)),
    }
    return Request(scope)


def refused(req: Request, required: bool = False) -> bool:
    try:
        same_origin(req, required=required)
    except Refused as refusal:
        assert refusal.status == 403 and refusal.code == "origin_not_allowed"
        return True
    return False


def test_acting_takes_tools_our_pages_and_listed_origins() -> None:
    assert not refused(request(()))  # a tool sends no Origin
    assert not refused(request((), f"https://{HOST}"))
    assert refused(request((), "https://evil.example"))
    assert refused(request((), f"http://{HOST}"))  # our host and port, another scheme: another origin
    assert not refused(request(("https://app.example",), "https://app.example"))


@pytest.mark.parametrize("origins", [(), ("*",), ("https://app.example", "*")])
def test_a_sign_in_takes_our_pages_and_origins_listed_by_name_never_the_wildcard(origins: tuple[str, ...]) -> None:
    assert not refused(request(origins, f"https://{HOST}"), required=True)
    assert refused(request(origins, "https://evil.example"), required=True)
    assert refused(request(origins, "null"), required=True)
    assert refused(request(origins, f"http://{HOST}"), required=True)
    assert refused(request(origins), required=True)  # a browser's form always says where it comes from
    assert refused(request(origins, "https://app.example"), required=True) == ("https://app.example" not in origins)


def test_only_a_parameter_named_token_exactly_is_a_token() -> None:
    assert query_token(request((), query=b"a=1&token=x%2Ey")) == "x.y"
    assert query_token(request((), query=b"tok%65n=abc")) is None
    assert query_token(request((), query=b"token")) is None
    assert query_token(request((), query=b"Token=abc&xtoken=d")) is None
