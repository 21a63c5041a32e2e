"""The security headers middleware (gateway.web.http.headers), driven as ASGI: every HTTP answer gets the headers,
a header the app set itself stays, and a websocket's messages pass through untouched."""

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.web.http.headers import CONTENT_SECURITY_POLICY, SecurityHeaders


def app_answering(*messages: Message) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        for message in messages:
            await send(message)

    return app


async def run(scope_type: str, *messages: Message) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        raise AssertionError("not read")

    await SecurityHeaders(app_answering(*messages))({"type": scope_type}, receive, send)
    return sent


async def test_every_http_answer_carries_the_security_headers() -> None:
    start, body = await run(
        "http",
        {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]},
        {"type": "http.response.body", "body": b"no"},
    )
    headers = dict(start["headers"])
    assert headers[b"content-security-policy"] == CONTENT_SECURITY_POLICY.encode()
    assert b"frame-ancestors 'none'" in headers[b"content-security-policy"]
    assert b"script-src 'self';" in headers[b"content-security-policy"]
    assert headers[b"x-content-type-options"] == b"nosniff"
    assert headers[b"x-frame-options"] == b"DENY"
    assert headers[b"referrer-policy"] == b"no-referrer"
    assert headers[b"content-type"] == b"text/plain" and body == {"type": "http.response.body", "body": b"no"}


async def test_a_header_the_app_sets_itself_is_kept() -> None:
    (start,) = await run(
        "http", {"type": "http.response.start", "status": 200, "headers": [(b"referrer-policy", b"strict-origin")]}
    )
    assert [v for k, v in start["headers"] if k == b"referrer-policy"] == [b"strict-origin"]


async def test_websocket_messages_pass_through_untouched() -> None:
    denial = {
        "type": "websocket.http.response.start",
        "status": 401,
        "headers": [(b"content-type", b"application/json")],
    }
    assert await run("websocket", {"type": "websocket.accept"}, denial) == [{"type": "websocket.accept"}, denial]
    assert denial["headers"] == [(b"content-type", b"application/json")]
