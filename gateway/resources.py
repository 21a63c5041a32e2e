"""The files the package ships beside its code: the SQL migrations and the browser app.

Both are found from the package itself, never from the working directory. The migrations live in gateway/sql/.
The browser app is developed in the checkout's top-level frontend/ folder; pyproject.toml maps it into the wheel
as gateway/frontend/, and an editable install (a checkout) reads the folder itself.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SQL = PACKAGE / "sql"


def frontend() -> Path:
    packaged = PACKAGE / "frontend"
    return packaged if packaged.is_dir() else PACKAGE.parent / "frontend"


FRONTEND = frontend()
INDEX = FRONTEND / "index.html"
