"""The image deploy/container/Containerfile builds from the wheel alone runs as its fixed non-root user and, from
inside, migrates a real PostgreSQL and passes `gateway check` against it and a real Redis (exit 0).

No image registry is reachable here, so the base is made from Debian's packages (mmdebstrap: bookworm with
python3 and python3-venv, kept as a local image for the next run) and given as the Containerfile's BASE, where
users keep python:3.12-slim. buildah (Debian's package) builds and runs it with chroot isolation on the host's
network, as root. Without buildah or mmdebstrap, or not as root, the test skips; with GATEWAY_REQUIRE_BUILDAH=1
(CI) it fails instead. A minute or two (the first run also makes the base)."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.embedded import EmbeddedValkey, postgres_reachable
from tests.conftest import LOCAL_POSTGRES, create_database, drop_database
from tests.integration.test_wheel import BUILD_FROM, clean_env

pytestmark = [pytest.mark.slow, pytest.mark.image]

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "container" / "Containerfile"
BASE = "localhost/jobs-gateway-test-base:bookworm"  # Debian's Python, as the base a user would pull
BASE_PACKAGES = "python3,python3-venv"
IMAGE = "localhost/jobs-gateway:test"
BUILD_WITHIN = 600  # pip fetches the dependencies inside the build; mmdebstrap fetches the base's packages
USER = "10001"


def _tools() -> None:
    missing = [tool for tool in ("buildah", "mmdebstrap") if shutil.which(tool) is None]
    why = f"{', '.join(missing)} not installed (Debian's packages)" if missing else ""
    if not why and os.geteuid() != 0:
        why = "buildah's chroot isolation needs root"
    if why:
        if os.environ.get("GATEWAY_REQUIRE_BUILDAH") == "1":
            pytest.fail(f"GATEWAY_REQUIRE_BUILDAH=1 but {why}")
        pytest.skip(why)


def _run(*argv: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, (
            f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done


def _base(work: Path) -> str:
    """The base image, made once from Debian's packages: a root filesystem with python3 and its venv module."""
    if _run("buildah", "images", "--quiet", BASE, check=False).stdout.strip():
        return BASE
    rootfs = work / "base.tar"
    _run("mmdebstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm", str(rootfs), timeout=BUILD_WITHIN)
    container = _run("buildah", "from", "scratch").stdout.strip()
    try:
        _run("buildah", "add", container, str(rootfs), "/")
        _run("buildah", "commit", "--quiet", container, BASE)
    finally:
        _run("buildah", "rm", container, check=False)
    return BASE


def _wheel(work: Path) -> Path:
    """A build context holding the wheel and nothing else (built from a copy: build/ stays out of the checkout)."""
    source, context = work / "source", work / "context"
    source.mkdir()
    for name in BUILD_FROM:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
        else:
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(context), str(source)],
        cwd=work,
        env=clean_env(work / "none"),
        check=True,
        timeout=BUILD_WITHIN,
    )
    return context


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _tools()
    work = tmp_path_factory.mktemp("image")
    base, context = _base(work), _wheel(work)
    # pip inside the build trusts what pip here trusts (a proxy's own CA, say), mounted for the build alone.
    ca = os.environ.get("PIP_CERT") or ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
    index = [f"--build-arg=PIP_INDEX_URL={os.environ['PIP_INDEX_URL']}"] if os.environ.get("PIP_INDEX_URL") else []
    _run(
        "buildah", "bud", "--quiet", "--isolation", "chroot", "--network", "host",
        "--file", str(CONTAINERFILE), "--build-arg", f"BASE={base}",
        "--volume", f"{ca}:/run/host-ca.crt:ro", "--build-arg", "PIP_CERT=/run/host-ca.crt", *index,
        "--tag", IMAGE, str(context),
        timeout=BUILD_WITHIN,
    )  # fmt: skip
    try:
        yield IMAGE
    finally:
        _run("buildah", "rmi", "--force", IMAGE, check=False)


@pytest.fixture
def container(image: str) -> Iterator[str]:
    name = _run("buildah", "from", "--quiet", image).stdout.strip()
    try:
        yield name
    finally:
        _run("buildah", "rm", name, check=False)


@pytest.fixture
def provisioned_redis(tmp_path: Path) -> Iterator[str]:
    """A Redis as docs/operations.md provisions one: a memory bound and no eviction (`gateway check` asks both)."""
    server = EmbeddedValkey(tmp_path / "valkey")
    url = server.start()
    try:
        client = redis.Redis.from_url(url)
        client.config_set("maxmemory", "64mb")
        client.config_set("maxmemory-policy", "noeviction")
        client.close()
        yield url
    finally:
        server.stop()


@pytest.fixture
def empty_database(pg_admin: str) -> Iterator[str]:
    # The container reaches PostgreSQL over TCP: the machine's server even where this worker streams on an
    # embedded one of its own (tests/conftest.py's pg_admin); a migration holds no transaction open for long.
    if (
        "host=" in pg_admin
        and not os.environ.get("TEST_DATABASE_URL")
        and asyncio.run(postgres_reachable(LOCAL_POSTGRES))
    ):
        pg_admin = LOCAL_POSTGRES
    url = create_database(pg_admin, migrated=False)
    if "host=" in url:  # an embedded server's Unix socket, which the container does not see
        drop_database(pg_admin, url)
        if os.environ.get("GATEWAY_REQUIRE_BUILDAH") == "1":
            pytest.fail("the image reaches PostgreSQL over TCP: give TEST_DATABASE_URL or the machine's server")
        pytest.skip("PostgreSQL is an embedded one on a Unix socket")
    try:
        yield url
    finally:
        drop_database(pg_admin, url)


def _inside(container: str, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    settings = [f"--env={name}={value}" for name, value in env.items()]
    return _run(
        "buildah", "run", "--isolation", "chroot", "--network", "host", *settings, container, "--", *argv, check=False
    )


def test_the_image_runs_as_its_fixed_user_with_the_gateway_on_its_path(image: str, container: str) -> None:
    config = _run("buildah", "inspect", "--format", "{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}", image)
    assert config.stdout.split() == [f"{USER}:{USER}", "[gateway]"]
    who = _inside(container, "id", "-u")
    assert who.stdout.strip() == USER, who.stderr
    version = _inside(container, "gateway", "--version")
    assert version.returncode == 0 and version.stdout.startswith("gateway "), version.stderr
    assert _inside(container, "test", "-e", "/tmp/wheels").returncode == 1  # the build's wheels are gone


def test_the_image_migrates_and_passes_gateway_check(
    container: str, empty_database: str, provisioned_redis: str
) -> None:
    settings = {"DATABASE_URL": empty_database, "REDIS_URL": provisioned_redis, "GATEWAY_SECRET": secrets.token_hex(32)}
    for _ in range(2):  # migrating twice is harmless
        migrated = _inside(container, "gateway", "migrate", **settings)
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    checked = _inside(container, "gateway", "check", **settings)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert lines and all(line.startswith("ok") for line in lines), checked.stdout
    assert any("PostgreSQL" in line for line in lines) and any("Redis" in line for line in lines), checked.stdout
