"""Reading the binlog through mysql-replication, as whole transactions.

`BinlogReader` runs the library's `BinLogStreamReader` on a thread of its own (its reads block until
the server sends an event) and hands the poll `Transaction`s: the row changes of one database
transaction, from its GTID (or BEGIN) event up to its XID (or COMMIT) event, each with the table
schema of its own table map. With `binlog_row_metadata=FULL` a table map carries the column names,
signedness, character sets, ENUM/SET members and primary key, so a row is decoded with the columns
the table had when the row was written, before and after an ALTER TABLE alike. A DDL statement is
an empty transaction (it moves the position on).

The reader starts after a GTID position on MariaDB (`@slave_connect_state`, the way its replicas
connect) and at a file and position on MySQL (`COM_BINLOG_DUMP`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eosconnect.connectors.mysql_cdc.types import ColumnInfo

__all__ = [
    "BinlogLost",
    "BinlogReader",
    "Position",
    "RowChange",
    "Transaction",
    "column_info",
    "is_connection_loss",
]


class BinlogLost(ConnectionError):
    """The binlog connection was lost (the server restarted, the network dropped). mysql-replication
    reconnects by itself from where it was, which may be inside a transaction (or, on MariaDB, back
    at the first position): the reader stops instead, and the task opens a new one after the last
    whole transaction it read."""


def is_connection_loss(exc: BaseException) -> bool:
    """A lost or refused-for-now connection, which a new connection may mend (not a refused login)."""
    import pymysql

    if isinstance(exc, BinlogLost | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, pymysql.err.OperationalError):
        code = exc.args[0] if exc.args else 0
        return code not in (1045, 1044, 1049, 1236)  # refused login or database, binlog position gone
    return isinstance(exc, pymysql.err.InterfaceError | OSError)


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Position:
    """Where the binlog is read from: a file and position, and the GTID set executed up to there
    (MariaDB: `domain-server-seq` per domain, comma-separated; MySQL: `uuid:1-5`)."""

    file: str
    pos: int
    gtids: str | None = None


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row of a rows event: op c/u/d, the before/after images by column name."""

    db: str
    table: str
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...]
    op: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    pos: int  # the rows event's own position
    row: int  # the row's index within the rows event
    ts_ms: int
    #: The rows event's index in its transaction as Debezium counts (the BEGIN or GTID event is 0,
    #: table maps count): Debezium's offset key `event`, the events a restart skips.
    event: int = 0


@dataclass
class Transaction:
    """One database transaction as the binlog holds it; `end` is the position after its commit."""

    gtid: str | None
    file: str
    pos: int  # where the transaction begins (its GTID or BEGIN event)
    thread: int | None = None
    changes: list[RowChange] = field(default_factory=list)
    end: Position | None = None
    query: str | None = None  # the statement of a DDL transaction


def column_info(table_map: Any, nulls: bytes) -> tuple[tuple[ColumnInfo, ...], tuple[str, ...]]:
    """The columns and primary key a table map event describes (needs binlog_row_metadata=FULL);
    `nulls` is its bitmap of nullable columns."""
    from pymysql.constants import FIELD_TYPE

    kinds = {
        FIELD_TYPE.TINY: "tinyint", FIELD_TYPE.SHORT: "smallint", FIELD_TYPE.INT24: "mediumint",
        FIELD_TYPE.LONG: "int", FIELD_TYPE.LONGLONG: "bigint", FIELD_TYPE.FLOAT: "float",
        FIELD_TYPE.DOUBLE: "double", FIELD_TYPE.NEWDECIMAL: "decimal", FIELD_TYPE.DECIMAL: "decimal",
        FIELD_TYPE.DATE: "date", FIELD_TYPE.NEWDATE: "date", FIELD_TYPE.DATETIME: "datetime",
        FIELD_TYPE.TIMESTAMP: "timestamp", FIELD_TYPE.TIME: "time", FIELD_TYPE.YEAR: "year",
        FIELD_TYPE.ENUM: "enum", FIELD_TYPE.SET: "set", FIELD_TYPE.BIT: "bit", FIELD_TYPE.JSON: "json",
        FIELD_TYPE.GEOMETRY: "geometry", 17: "timestamp", 18: "datetime", 19: "time",
    }  # fmt: skip
    textual = {FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING, FIELD_TYPE.BLOB}
    out = []
    for i, column in enumerate(table_map.columns):
        if column.type in textual:
            binary = column.character_set_name == "binary" or column.charset_id == 63
            kind = "bytes" if binary else "text"
        else:
            kind = kinds.get(column.type, "geometry")
        nullable = bool(nulls[i // 8] & (1 << (i % 8)))
        out.append(
            ColumnInfo(
                column.name or f"UNKNOWN_COL{i}",
                kind,
                nullable=nullable,
                unsigned=bool(column.unsigned),
                precision=getattr(column, "precision", 0) if kind == "decimal" else 0,
                scale=getattr(column, "decimals", 0) if kind == "decimal" else 0,
                fsp=getattr(column, "fsp", 0) or 0,
                bits=getattr(column, "bits", 0) if kind == "bit" else 0,
                # mysql-replication puts '' (ENUM's index 0, the invalid value) before the members
                values=tuple(column.enum_values[1:] if column.enum_values else column.set_values or ()),
            )
        )
    key = tuple(c.name for c in table_map.columns if c.is_primary)
    return tuple(out), key


class BinlogReader:
    """The binlog after `start`, as `Transaction`s on a bounded queue, read by a thread of its own.
    `captured(db, table)` picks the tables whose rows are decoded; the others are skipped unread."""

    def __init__(
        self,
        connection: dict[str, Any],
        server_id: int,
        mariadb: bool,
        start: Position,
        captured: Callable[[str, str], bool],
        queue_size: int = 64,
    ) -> None:
        self.connection, self.server_id, self.mariadb = dict(connection), server_id, mariadb
        self.start, self.captured = start, captured
        self.transactions: queue.Queue[Transaction | BaseException] = queue.Queue(queue_size)
        self._stopping = threading.Event()
        self._stream: Any = None
        self._nulls: dict[int, bytes] = {}  # table id -> the nullable columns of its latest table map
        self._maps: dict[int, tuple[Any, tuple[tuple[ColumnInfo, ...], tuple[str, ...]]]] = {}
        self._thread = threading.Thread(target=self._run, name="mysql-cdc-binlog", daemon=True)

    def open(self) -> None:
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import (
            GtidEvent,
            MariadbGtidEvent,
            QueryEvent,
            RotateEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import (
            DeleteRowsEvent,
            TableMapEvent,
            UpdateRowsEvent,
            WriteRowsEvent,
        )

        settings: dict[str, Any] = {}
        if self.mariadb:
            settings = {"is_mariadb": True, "auto_position": self.start.gtids or ""}
        else:
            settings = {"resume_stream": True, "log_file": self.start.file, "log_pos": self.start.pos}
        self._stream = BinLogStreamReader(
            connection_settings=self.connection,
            server_id=self.server_id,
            blocking=True,
            only_events=[
                RotateEvent,
                GtidEvent,
                MariadbGtidEvent,
                QueryEvent,
                XidEvent,
                TableMapEvent,
                WriteRowsEvent,
                UpdateRowsEvent,
                DeleteRowsEvent,
            ],
            slave_heartbeat=5,
            enable_logging=False,
            **settings,
        )
        self._thread.start()

    def _put(self, item: Transaction | BaseException) -> None:
        while not self._stopping.is_set():
            try:
                self.transactions.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        try:
            self._read()
        except BaseException as exc:
            if not self._stopping.is_set():
                self._put(exc)

    def _read(self) -> None:
        from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
        from pymysqlreplication.row_event import (
            DeleteRowsEvent,
            TableMapEvent,
            UpdateRowsEvent,
            WriteRowsEvent,
        )

        file, txn, connects, events = self.start.file, None, 0, 0
        gtids = _Gtids(self.start.gtids, self.mariadb)
        for event in self._stream:
            if self._stopping.is_set():
                return
            end = event.packet.log_pos
            begin = end - event.packet.event_size if end else 0  # the whole event: header and checksum too
            if isinstance(event, TableMapEvent):
                self._nulls[event.table_id] = bytes(event.null_bitmask)
                events += 1
                continue
            if isinstance(event, RotateEvent):
                if event.timestamp == 0:  # the artificial rotate a dump starts with
                    connects += 1
                    if connects > 1:
                        raise BinlogLost("the binlog connection was lost and mysql-replication reconnected")
                file = event.next_binlog
                continue
            if isinstance(event, MariadbGtidEvent | GtidEvent):
                txn, events = Transaction(event.gtid, file, begin), 1
                continue
            if isinstance(event, QueryEvent):
                query = event.query if isinstance(event.query, str) else event.query.decode(errors="replace")
                if query == "BEGIN":
                    if txn is None:
                        txn = Transaction(None, file, begin)
                    # MySQL writes BEGIN after the GTID event: Debezium restarts from the BEGIN
                    txn.pos, txn.thread, events = begin, event.slave_proxy_id, 1
                    continue
                if txn is None:
                    txn = Transaction(None, file, begin)
                if query != "COMMIT":
                    txn.query = query  # DDL (standalone) or a statement-format change: no rows here
                    txn.thread = event.slave_proxy_id
                gtids.add(txn.gtid)
                txn.end = Position(file, end, gtids.text())
                self._put(txn)
                txn = None
                continue
            if isinstance(event, XidEvent):
                if txn is None:
                    txn = Transaction(None, file, begin)
                gtids.add(txn.gtid)
                txn.end = Position(file, end, gtids.text())
                self._put(txn)
                txn = None
                continue
            if isinstance(event, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
                index, events = events, events + 1
                if txn is None or not self.captured(event.schema, event.table):
                    continue
                table_map = self._stream.table_map.get(event.table_id)
                columns, key = self._described(table_map, event)
                ts_ms = event.timestamp * 1000
                for row_index, row in enumerate(event.rows):
                    if isinstance(event, WriteRowsEvent):
                        op, before, after = "c", None, _empty_sets(row["values"], row.get("none_sources"))
                    elif isinstance(event, UpdateRowsEvent):
                        op = "u"
                        before = _empty_sets(row["before_values"], row.get("before_none_sources"))
                        after = _empty_sets(row["after_values"], row.get("after_none_sources"))
                    else:
                        op, before, after = "d", _empty_sets(row["values"], row.get("none_sources")), None
                    txn.changes.append(
                        RowChange(
                            event.schema,
                            event.table,
                            columns,
                            key,
                            op,
                            before,
                            after,
                            begin,
                            row_index,
                            ts_ms,
                            index,
                        )
                    )

    def close(self) -> None:
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            # The thread waits in a socket read until the server sends something (a heartbeat every
            # few seconds): shutting the socket down ends that read at once; PyMySQL has no call for it.
            sock = getattr(getattr(stream, "_stream_connection", None), "_sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            try:
                stream.close()
            except Exception as exc:  # the thread may be inside a read; closing ends it
                log.debug("closing the binlog stream: %s", exc)
        if self._thread.is_alive():
            self._thread.join(5)

    def _described(self, table_map: Any, event: Any) -> tuple[tuple[ColumnInfo, ...], tuple[str, ...]]:
        """`column_info` of the table map a rows event refers to, worked out once per table map."""
        if table_map is None:
            raise RuntimeError(f"rows event of {event.schema}.{event.table} without its table map")
        cached = self._maps.get(id(table_map))
        if cached is not None and cached[0] is table_map:
            return cached[1]
        found = column_info(table_map, self._nulls.get(event.table_id, b"\xff" * 512))
        if len(self._maps) > 4096:
            self._maps.clear()
        self._maps[id(table_map)] = (table_map, found)
        return found


class _Gtids:
    """The executed GTID set, advanced by each transaction's GTID. MariaDB: the last sequence number
    per replication domain (`domain-server-seq,...`); MySQL: intervals per server UUID."""

    def __init__(self, start: str | None, mariadb: bool) -> None:
        self.mariadb = mariadb
        self.domains: dict[str, str] = {}
        self.mysql: dict[str, list[list[int]]] = {}
        for part in (start or "").replace("\n", "").split(","):
            part = part.strip()
            if not part:
                continue
            if mariadb:
                self.domains[part.split("-", 1)[0]] = part
            else:
                uuid, *ranges = part.split(":")
                for r in ranges:
                    low, _, high = r.partition("-")
                    self.mysql.setdefault(uuid, []).append([int(low), int(high or low)])

    def add(self, gtid: str | None) -> None:
        if not gtid:
            return
        if self.mariadb:
            self.domains[gtid.split("-", 1)[0]] = gtid
            return
        uuid, number = gtid.rsplit(":", 1)
        intervals = self.mysql.setdefault(uuid, [])
        n = int(number)
        if intervals and intervals[-1][1] + 1 == n:
            intervals[-1][1] = n
        elif not any(low <= n <= high for low, high in intervals):
            intervals.append([n, n])

    def text(self) -> str | None:
        if self.mariadb:
            return ",".join(self.domains[d] for d in sorted(self.domains, key=int)) or None
        parts = [
            uuid + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in ranges)
            for uuid, ranges in sorted(self.mysql.items())
        ]
        return ",".join(parts) or None


def _empty_sets(values: dict[str, Any], none_sources: dict[str, str] | None) -> dict[str, Any]:
    """`values` with each empty SET as '' (mysql-replication gives None for it, as for NULL, and
    names which it was in `none_sources`): an empty SET is a value, not NULL."""
    for column, source in (none_sources or {}).items():
        if source == "empty set":
            values[column] = ""
    return values
