"""The initial snapshot: every captured table's rows read in one consistent-snapshot transaction,
and the binlog position that transaction sees, from which the stream starts.

`snapshot.locking.mode=minimal` (the default, as in Debezium) takes `FLUSH TABLES WITH READ LOCK`
only while `START TRANSACTION WITH CONSISTENT SNAPSHOT` begins and the position is read (no commit
can happen in between, so the position is exactly the snapshot's), `extended` keeps the lock to the
end of the snapshot, and `none` takes none: MariaDB's consistent snapshot reports its own binlog
position (`binlog_snapshot_file`/`binlog_snapshot_position`, and `BINLOG_GTID_POS` of those), exact
without a lock; MySQL has no such report, so there `none` reads the position after the snapshot
began (transactions committing meanwhile may then be both in the snapshot and streamed).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from eosconnect.api.data import Struct
from eosconnect.connectors.mysql_cdc import catalog
from eosconnect.connectors.mysql_cdc.binlog import Position
from eosconnect.connectors.mysql_cdc.config import LockingMode, MySqlCdcConfig
from eosconnect.connectors.mysql_cdc.events import TableEvents

__all__ = ["Snapshot", "binlog_files", "current_position"]

log = logging.getLogger(__name__)


def binlog_files(conn: Any) -> list[str]:
    """The binlog files the server still has, oldest first."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [str(row[0]) for row in cur.fetchall()]


def current_position(conn: Any, mariadb: bool) -> Position:
    """The end of the binlog now, with the executed GTID set."""
    with conn.cursor() as cur:
        if mariadb:
            cur.execute("SHOW MASTER STATUS")
        else:
            try:
                cur.execute("SHOW BINARY LOG STATUS")  # MySQL 8.4 and later
            except Exception:
                cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        if row is None:
            raise RuntimeError("the server keeps no binary log (SHOW MASTER STATUS is empty): enable log_bin")
        file, pos = str(row[0]), int(row[1])
        if mariadb:
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            gtids = str(cur.fetchone()[0] or "") or None
        else:
            gtids = (str(row[4] or "").replace("\n", "") or None) if len(row) > 4 else None
    return Position(file, pos, gtids)


class Snapshot:
    """One snapshot: `position` is where the stream continues; `rows()` yields each captured
    table's rows as (table events, after struct), table after table."""

    def __init__(self, config: MySqlCdcConfig, mariadb: bool, tables: Sequence[tuple[str, str]]) -> None:
        self.config, self.mariadb = config, mariadb
        self.tables = list(tables)
        self.started_ms = int(time.time() * 1000)
        self.conn = catalog.connect(config)
        self._locked = False
        mode = LockingMode(config["snapshot.locking.mode"])
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            began = time.monotonic()
            if mode is not LockingMode.NONE:
                cur.execute("FLUSH TABLES WITH READ LOCK")
                self._locked = True
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            if mode is LockingMode.NONE and mariadb:
                cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
                file, pos = status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
                self.position = Position(file, pos, str(cur.fetchone()[0] or "") or None)
            else:
                self.position = current_position(self.conn, mariadb)
            if mode is LockingMode.MINIMAL:
                cur.execute("UNLOCK TABLES")
                self._locked = False
                log.info(
                    "MySqlCdcSource: snapshot at %s (global read lock held %.0f ms)",
                    self.position, (time.monotonic() - began) * 1000,
                )  # fmt: skip
        self.meta = {t: catalog.table_meta(self.conn, *t) for t in self.tables}

    def rows(self, events_of: dict[tuple[str, str], TableEvents]) -> Iterator[tuple[TableEvents, Struct]]:
        import pymysql.cursors

        size = self.config["snapshot.fetch.size"]
        for db, table in self.tables:
            events = events_of[(db, table)]
            names = [c.name for c in self.meta[(db, table)].columns]
            select = ", ".join(catalog.quote(n) for n in names)
            with self.conn.cursor(pymysql.cursors.SSCursor) as cur:
                cur.execute(f"SELECT {select} FROM {catalog.quote(db)}.{catalog.quote(table)}")
                while True:
                    batch = cur.fetchmany(size)
                    if not batch:
                        break
                    for row in batch:
                        yield events, events.row(dict(zip(names, row, strict=True)))

    def close(self) -> None:
        with contextlib.suppress(Exception), self.conn.cursor() as cur:
            if self._locked:
                cur.execute("UNLOCK TABLES")
            cur.execute("COMMIT")
        with contextlib.suppress(Exception):
            self.conn.close()
