"""The initial snapshot of `PostgresCdcTask`: the captured tables read in the slot's exported snapshot."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from eosconnect.api.records import SourceRecord
from eosconnect.connectors.postgres_cdc import catalog
from eosconnect.connectors.postgres_cdc.events import SourceInfo, TableEvents
from eosconnect.connectors.postgres_cdc.offsets import CAPTURED
from eosconnect.connectors.postgres_cdc.pgoutput import Column, TupleValue
from eosconnect.connectors.postgres_cdc.replication import format_lsn
from eosconnect.connectors.postgres_cdc.types import BPCHAR

if TYPE_CHECKING:
    from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask

__all__ = ["Snapshot", "table_events"]

log = logging.getLogger(__name__)


class Snapshot:
    """Reads the captured tables in the slot's exported snapshot (REPEATABLE READ, SET TRANSACTION
    SNAPSHOT), snapshot.fetch.size rows per poll, one row ahead so each event's `source.snapshot`
    says what Debezium's does: first, first_in_data_collection, true, last_in_data_collection, last."""

    def __init__(self, task: PostgresCdcTask, lsn: int, snapshot_name: str) -> None:
        import psycopg

        self.task, self.lsn = task, lsn
        self.fetch = int(task.cfg["snapshot.fetch.size"])
        self.conn = psycopg.connect(task.cfg.dsn())
        # psycopg opens the transaction (BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY) before the
        # first statement, which must be SET TRANSACTION SNAPSHOT.
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        self.conn.read_only = True
        self.conn.execute(f"SET TRANSACTION SNAPSHOT '{snapshot_name}'")
        row = self.conn.execute("SELECT txid_current()").fetchone()
        assert row is not None  # a SELECT of a function returns one row
        self.tx_id = int(row[0])  # source.txId
        self.ts = dt.datetime.now(dt.UTC)
        self.ts_usec = int(self.ts.timestamp() * 1_000_000)
        self.tables = [
            catalog.table_meta(self.conn, s, t) for s, t in catalog.published_tables(self.conn, task.cfg)
        ]
        log.info("PostgresCdcSource: snapshot of %d table(s) at LSN %s", len(self.tables), format_lsn(lsn))
        self._source = self._rows()
        self._ahead = next(self._source, None)
        self._previous: int | None = None  # the table index of the last row handed out

    def _rows(self) -> Generator[tuple[int, TableEvents, tuple[TupleValue, ...]], None, None]:
        for index, meta in enumerate(self.tables):
            events = table_events(self.task, self.conn, meta)
            columns = ", ".join(_as_text(c) for c in meta.columns)
            with self.conn.cursor(name=f"eosconnect_snapshot_{meta.oid}") as cursor:
                cursor.execute(f"SELECT {columns} FROM {catalog.qualified(meta.schema, meta.table)}")
                while rows := cursor.fetchmany(self.fetch):
                    for row in rows:
                        yield index, events, row

    def next_batch(self) -> tuple[list[SourceRecord], bool]:
        """The next records and whether the snapshot is complete (the last one's offset then says so)."""
        out: list[SourceRecord] = []
        last_table = len(self.tables) - 1
        while self._ahead is not None and len(out) < self.fetch:
            index, events, row = self._ahead
            self._ahead = next(self._source, None)
            first_in_table = self._previous != index
            last_in_table = self._ahead is None or self._ahead[0] != index
            self._previous = index
            # Debezium's order of precedence (a one-row snapshot is "last")
            if last_in_table and index == last_table:
                marker = "last"
            elif first_in_table and index == 0:
                marker = "first"
            elif last_in_table:
                marker = "last_in_data_collection"
            elif first_in_table:
                marker = "first_in_data_collection"
            else:
                marker = "true"
            out.append(self._row(events, row, marker, final=self._ahead is None))
        return out, self._ahead is None

    def _row(
        self, events: TableEvents, row: tuple[TupleValue, ...], marker: str, final: bool
    ) -> SourceRecord:
        after = events.row(row)
        source = SourceInfo(self.task.prefix, self.task.db, self.ts, marker, self.tx_id, self.lsn)
        value = events.envelope("r", None, after, source, dt.datetime.now(dt.UTC))
        return SourceRecord(
            source_partition=self.task.partition,
            source_offset={
                "lsn": self.lsn,
                "event": -1,
                # Debezium's snapshot keys, so Debezium can take over from this offset (docs/cdc.md)
                "txId": self.tx_id,
                "ts_usec": self.ts_usec,
                "snapshot": "INITIAL",
                "snapshot_completed": final,
                "last_snapshot_record": final,
                CAPTURED: self.task._captured_offset,
            },
            topic=events.topic,
            key=events.key(after),
            value=value,
            key_schema=events.key_schema,
            value_schema=events.envelope_schema,
            headers=self.task.context_headers,
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._source.close()
        with contextlib.suppress(Exception):
            self.conn.rollback()
            self.conn.close()


def table_events(task: PostgresCdcTask, conn: Any, meta: catalog.TableMeta) -> TableEvents:
    """A table's events from its catalog metadata, with the task's settings (both snapshots')."""
    return TableEvents(
        task.prefix,
        meta.schema,
        meta.table,
        meta.columns,
        [meta.nullable[c.name] for c in meta.columns],
        task.cfg.key_columns.get(f"{meta.schema}.{meta.table}") or meta.primary_key,
        task.decimal_mode,
        task.time_mode,
        task.column_filter,
        catalog.type_names(conn, (c.type_oid for c in meta.columns)),
        task.interval_mode,
        task.placeholder,
    )


def _as_text(column: Column) -> str:
    """A snapshot column as the text pgoutput would send: `::text`, except that char(n) keeps its
    padding (the cast to text trims it; pgoutput and Debezium keep it)."""
    name = catalog._ident(column.name)
    if column.type_oid == BPCHAR and column.type_modifier >= 4:
        return f"rpad({name}::text, {column.type_modifier - 4})"
    return f"{name}::text"
