"""Who is signed in: the session, signing in and out, the account and its sessions and preferences."""

from __future__ import annotations

from ..http.answers import Account, Done, Me, Preferences, Renewed, Users
from .operation import Operation

ROUTES: list[Operation] = [
    Operation("get", "/api/me", "me", "session", "The signed-in user and their teams", "user", None, Me),
    Operation(
        "get",
        "/api/sign-in/users",
        "demoUsers",
        "session",
        "Demo mode: the users to pick from",
        "anyone",
        None,
        Users,
        "outside demo mode",
    ),
    Operation(
        "post",
        "/api/sign-in",
        "demoSignIn",
        "session",
        "Demo mode: sign in as a user (sets the session cookie)",
        "anyone",
        None,
        Done,
        "outside demo mode",
    ),
    Operation(
        "post",
        "/api/sign-out",
        "signOut",
        "session",
        "Clear the session cookie and revoke its session",
        "anyone",
        None,
        Done,
    ),
    Operation(
        "get",
        "/api/account",
        "account",
        "session",
        "The account page: the person's teams and role in each, and the sessions they are signed in with",
        "user",
        None,
        Account,
    ),
    Operation(
        "post",
        "/api/account/sessions/{id}/revoke",
        "revokeSession",
        "session",
        "End one of the person's own sessions on every node (their current one: this browser signs out)",
        "user",
        None,
        Done,
        "no active session of the person's with this id (another person's included)",
    ),
    Operation(
        "put",
        "/api/account/preferences",
        "setPreferences",
        "session",
        "Which finishes reach the person as a toast and a browser notification: mine, my team's or none",
        "user",
        Preferences,
        Preferences,
    ),
    Operation(
        "post",
        "/api/session/renew",
        "renewSession",
        "session",
        "A new session cookie before the current one expires (never past the session's maximum age)",
        "user",
        None,
        Renewed,
    ),
]
