"""A session's device in a few words, from its User-Agent: "Chrome on Linux", "Safari on iPhone", "curl".

Only for a person to recognise their own sessions on the account page: a User-Agent is whatever the client
says, so nothing is decided by it.
"""

from __future__ import annotations

import re

MAX_DEVICE = 60  # characters kept of a tool's own name

# The first that matches names the browser: Edge, Opera and others say "Chrome" and "Safari" too.
_BROWSERS = (
    ("Edg/", "Edge"),
    ("EdgA/", "Edge"),
    ("EdgiOS/", "Edge"),
    ("OPR/", "Opera"),
    ("SamsungBrowser/", "Samsung Internet"),
    ("Firefox/", "Firefox"),
    ("FxiOS/", "Firefox"),
    ("CriOS/", "Chrome"),
    ("Chromium/", "Chromium"),
    ("Chrome/", "Chrome"),
    ("Safari/", "Safari"),
)
_SYSTEMS = (
    ("iPhone", "iPhone"),
    ("iPad", "iPad"),
    ("Android", "Android"),
    ("CrOS", "ChromeOS"),
    ("Windows", "Windows"),
    ("Mac OS X", "macOS"),
    ("Macintosh", "macOS"),
    ("Linux", "Linux"),
)
_PRODUCT = re.compile(r"[A-Za-z][A-Za-z0-9._-]*")


def device_of(user_agent: str) -> str:
    """A browser and its system ("Firefox on Windows"), or a tool's own name ("python-httpx"), or "Unknown"."""
    browser = next((name for mark, name in _BROWSERS if mark in user_agent), None)
    system = next((name for mark, name in _SYSTEMS if mark in user_agent), None)
    if browser is not None and user_agent.startswith("Mozilla/"):
        return f"{browser} on {system}" if system else browser
    product = _PRODUCT.match(user_agent.strip())
    if product is None:
        return "Unknown"
    return product.group()[:MAX_DEVICE]
