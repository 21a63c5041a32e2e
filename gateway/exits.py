"""The exit status of every `gateway` command, for scripts and service managers (docs/cli.md's table lists them).

A command that fails for a reason of its own raises `CommandFailed`; the CLI prints its message as one line on
stderr (no traceback) and exits with its status. 1 is left to what nobody foresaw: a bug, with its traceback.
"""

from __future__ import annotations

OK = 0  # done, or stopped by SIGINT or SIGTERM
FAILED = 1  # an unexpected failure (the log or stderr has the traceback)
USAGE = 2  # bad usage or configuration: one line names the option, the setting or the port
UNAUTHORIZED = 3  # a token refused or expired (`tail`, `token --check`)
REFUSED = 4  # refused: a channel (`tail`), no such user or cluster, a migration edited after it was applied
UNREACHABLE = 5  # cannot reach PostgreSQL, Redis or the gateway


class CommandFailed(Exception):
    """A command's failure with its exit status; the message is one line, safe to show (no secret in it)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
