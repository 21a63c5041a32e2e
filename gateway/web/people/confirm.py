"""The page a sign-in link (`/?token=...`) shows: whom it signs in as, and a button that does it.

A link alone never signs a browser in: another site could send a victim's browser to a link with the
attacker's token, and the victim would then work (and type) in the attacker's account. The button posts
from this page (its Origin is checked), and the page cannot be framed (`frame-ancestors 'none'`).

The token stays out of every Referer (`Referrer-Policy: no-referrer`, gateway.web.http.headers) and leaves the
address bar and the history as the page loads (frontend/js/confirm.js, which also posts the form: under that
policy a form's own post would say `Origin: null`).
"""

from __future__ import annotations

from html import escape

PAGES = ("/", "/submissions")  # where a sign-in may lead: never another site

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in</title>
<script src="/js/theme.js"></script>
<link rel="stylesheet" href="/style.css">
<link rel="icon" href="data:,">
</head>
<body>
<main id="main" class="sign-in">
<h1>Sign in as {name}?</h1>
<p>This link signs this browser in as <b>{name}</b>. Go on only if you asked for it.</p>
<form method="post" action="/sign-in">
<input type="hidden" name="token" value="{token}">
<input type="hidden" name="next" value="{next}">
<button type="submit" id="confirm-sign-in">Sign in as {name}</button>
<a href="/">Cancel</a>
</form>
<p id="sign-in-problem" role="alert" hidden></p>
</main>
<script type="module" src="/js/confirm.js"></script>
</body>
</html>
"""


def confirmation_page(name: str, token: str, next_path: str) -> str:
    return _PAGE.format(name=escape(name), token=escape(token), next=escape(page(next_path)))


def page(path: str) -> str:
    return path if path in PAGES else "/"
