"""Field types for what callers send, so that anything a decoder lets through PostgreSQL can store.

Used in every request body's Struct: a value outside them is a 422 naming the field, never a 500 from
asyncpg or PostgreSQL.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

MAX_ID = 2**63 - 1  # PostgreSQL's bigint: asyncpg refuses to send more

# A row's id, as a caller names it.
Id = Annotated[int, msgspec.Meta(ge=1, le=MAX_ID)]

# Text PostgreSQL accepts: NUL is the one character a UTF-8 database refuses (lone surrogates never get
# this far: msgspec's JSON decoder refuses them, and MessagePack carries UTF-8 only).
NO_NUL = r"^[^\x00]*$"
Text = Annotated[str, msgspec.Meta(pattern=NO_NUL)]


def is_id(value: int) -> bool:
    return 1 <= value <= MAX_ID
