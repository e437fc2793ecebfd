"""A throwaway PostgreSQL server for tests (`eosconnect.devkafka.postgres.LocalPostgres`).

`postgres` (module scope) runs one from Debian's binaries (`make postgres`) and yields its
SQLAlchemy URL without a database name; `new_database` makes a fresh database on it. Without the
binaries the PostgreSQL cases are skipped, saying so. Registered for every test module by
tests/conftest.py. The URL it yields is a `PostgresServer`, which can also `kill()` the server (as
a crash) and `start()` it again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eosconnect.devkafka.postgres import LocalPostgres, PostgresSetupError, new_database

__all__ = ["PostgresServer", "new_database", "postgres"]


class PostgresServer(str):
    """The server's SQLAlchemy URL (without a database name), which can also crash and restart it."""

    server: LocalPostgres

    def __new__(cls, server: LocalPostgres) -> PostgresServer:
        url = super().__new__(cls, server.url)
        url.server = server
        return url

    def kill(self) -> None:
        """Stop at once, as a crash would (`pg_ctl -m immediate`: no checkpoint, clients cut off)."""
        self.server.kill()

    def start(self) -> None:
        self.server.start()


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this module; yields its SQLAlchemy URL without a database name."""
    try:
        server = LocalPostgres()
    except PostgresSetupError as exc:
        pytest.skip(str(exc))
    try:
        server.start()
    except PostgresSetupError as exc:
        server.stop()
        if "no `postgres` user" in str(exc):
            pytest.skip(str(exc))
        raise
    try:
        yield PostgresServer(server)
    finally:
        server.stop()
