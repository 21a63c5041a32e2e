"""Security headers on every HTTP response: pages, static files and API answers alike.

A plain ASGI middleware that touches `http` scopes only: a websocket's scope passes through untouched, and
with it the direct-link handover (gateway.web.websocket.direct) and a refused handshake's denial response.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The app's scripts and styles are files of its own (no inline script, style or handler anywhere); it talks
# to its own origin only (CSP3's 'self' covers ws: and wss: on the same host); nobody may frame it, so a
# page's buttons (the sign-in confirmation's above all) cannot be clicked through someone else's page.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-frame-options", "DENY"),  # frame-ancestors for browsers that predate it
    ("x-content-type-options", "nosniff"),
    # A sign-in link's token must not ride in the Referer of its confirmation page's requests (`/style.css`,
    # `/js/confirm.js`: proxies log it), nor any other URL's. Under this policy a form's own post says
    # `Origin: null`; the one form the app has (the sign-in's) is posted by a fetch, which keeps its Origin.
    ("referrer-policy", "no-referrer"),
)


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS:
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
