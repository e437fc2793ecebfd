"""A throwaway MariaDB server for tests (`eosconnect.devkafka.mariadb.LocalMariaDB`).

`mariadb` (module scope) yields the running `LocalMariaDB`; its `new_database()` makes a fresh
database and returns its SQLAlchemy URL (PyMySQL). `mariadb_binlog` is the same with a binary log
of row events (what change data capture reads). Skipped, saying how to install it, where
Debian's `mariadb-server` or PyMySQL is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eosconnect.devkafka.mariadb import LocalMariaDB, MariaDBSetupError

__all__ = ["mariadb", "mariadb_binlog"]


@pytest.fixture(scope="module")
def mariadb() -> Iterator[LocalMariaDB]:
    yield from _server(binlog=False)


@pytest.fixture(scope="module")
def mariadb_binlog() -> Iterator[LocalMariaDB]:
    yield from _server(binlog=True)


def _server(*, binlog: bool) -> Iterator[LocalMariaDB]:
    pytest.importorskip("pymysql", reason="PyMySQL (the test extra) is needed for the MariaDB tests")
    try:
        server = LocalMariaDB(binlog=binlog)
    except MariaDBSetupError as exc:
        pytest.skip(str(exc))
    try:
        server.start()
        yield server
    finally:
        server.stop()
