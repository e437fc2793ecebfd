"""A throwaway PostgreSQL server for tests, from Debian's binaries (`apt-get install -y postgresql`).

`postgres` (module scope) runs one from those binaries in a temp dir on a free loopback port (as
the `postgres` system user when the tests run as root, since initdb and pg_ctl refuse root) and
yields its SQLAlchemy URL without a database name; `new_database` makes a fresh database on it.
Without the binaries the PostgreSQL cases are skipped, saying so. Registered for every test module
by tests/conftest.py. The URL it yields is a `PostgresServer`, which can also `kill()` the server
(as a crash) and `start()` it again.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["PostgresServer", "new_database", "postgres"]


def _postgres_bindir() -> Path | None:
    candidates = [os.environ.get("EOSCONNECT_PG_BINDIR", "")]
    if found := shutil.which("pg_ctl"):
        candidates.append(str(Path(found).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer(str):
    """The server's SQLAlchemy URL (without a database name), which can also crash and restart it."""

    def __new__(cls, url: str, stop: list[str], start: list[str]) -> PostgresServer:
        server = super().__new__(cls, url)
        server._stop, server._start = stop, start
        return server

    def kill(self) -> None:
        """Stop at once, as a crash would (`pg_ctl -m immediate`: no checkpoint, clients cut off)."""
        subprocess.run(self._stop, capture_output=True, timeout=60, check=True)

    def start(self) -> None:
        subprocess.run(self._start, capture_output=True, timeout=120, check=True)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this module; yields its SQLAlchemy URL without a database name."""
    bindir = _postgres_bindir()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with "
            "`apt-get install -y postgresql` (or set EOSCONNECT_PG_BINDIR)"
        )
    prefix: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="eosconnect-pg-"))
    if os.geteuid() == 0:
        try:
            shutil.chown(base, "postgres", "postgres")
        except LookupError:
            shutil.rmtree(base)
            pytest.skip("running as root and there is no `postgres` user to run PostgreSQL as")
        prefix = ["runuser", "-u", "postgres", "--"]
    data, port = base / "data", _free_port()

    def run(*args: str) -> None:
        result = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")

    run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    options += " -c wal_level=logical"  # change data capture tests read logical replication slots
    start = [
        str(bindir / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(base / "server.log"),
        "-w",
        "start",
    ]
    stop = [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
    run(*start)
    try:
        yield PostgresServer(f"postgresql+psycopg://postgres@127.0.0.1:{port}", stop, [*prefix, *start])
    finally:
        subprocess.run(stop, capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def new_database(server: str) -> str:
    """A new, empty database on the `postgres` server; its SQLAlchemy URL."""
    import sqlalchemy as sa

    name = f"t_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
    finally:
        admin.dispose()
    return f"{server}/{name}"
