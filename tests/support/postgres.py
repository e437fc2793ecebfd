"""A throwaway PostgreSQL server for tests, from Debian's binaries (`apt-get install -y postgresql`).

`postgres` (module scope) runs one (`eosconnect.tools.local_postgres.LocalPostgres`) in a temp dir
on a free loopback port and yields its SQLAlchemy URL without a database name; `new_database`
makes a fresh database on it. Without the binaries the PostgreSQL cases are skipped, saying so.
Registered for every test module by tests/conftest.py. The URL it yields is a `PostgresServer`,
which can also `kill()` the server (as a crash) and `start()` it again.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosconnect.tools.local_postgres import LocalPostgres, PostgresUnavailable

__all__ = ["PostgresServer", "new_database", "postgres"]


class PostgresServer(str):
    """The server's SQLAlchemy URL (without a database name), which can also crash and restart it."""

    def __new__(cls, server: LocalPostgres) -> PostgresServer:
        url = super().__new__(cls, server.url)
        url._server = server
        return url

    def kill(self) -> None:
        """Stop at once, as a crash would (`pg_ctl -m immediate`: no checkpoint, clients cut off)."""
        self._server.kill()

    def start(self) -> None:
        self._server.start()


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this module; yields its SQLAlchemy URL without a database name."""
    server = LocalPostgres(Path(tempfile.mkdtemp(prefix="eosconnect-pg-")))
    try:
        server.start()
    except PostgresUnavailable as exc:
        server.stop()
        pytest.skip(str(exc))
    try:
        yield PostgresServer(server)
    finally:
        server.stop()


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
