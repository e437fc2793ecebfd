"""A throwaway MariaDB server for tests (`eosconnect.devkafka.mariadb.LocalMariaDB`).

`mariadb` (module scope) yields the running `LocalMariaDB`; its `new_database()` makes a fresh
database and returns its SQLAlchemy URL (PyMySQL). Skipped, saying how to install it, where
Debian's `mariadb-server` or PyMySQL is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eosconnect.devkafka.mariadb import LocalMariaDB, MariaDBSetupError

__all__ = ["mariadb"]


@pytest.fixture(scope="module")
def mariadb() -> Iterator[LocalMariaDB]:
    pytest.importorskip("pymysql", reason="PyMySQL (the test extra) is needed for the MariaDB tests")
    try:
        server = LocalMariaDB()
    except MariaDBSetupError as exc:
        pytest.skip(str(exc))
    try:
        server.start()
        yield server
    finally:
        server.stop()
