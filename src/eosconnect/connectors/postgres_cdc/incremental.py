"""Incremental snapshots (Debezium's, after Netflix's DBLog) of `PostgresCdcTask`, run while it streams.

A table is read in chunks of `incremental.snapshot.chunk.size` rows in primary key order. For each
chunk the task inserts a low watermark row into the signal table (`snapshot-window-open`), selects
the chunk, and inserts a high watermark row (`snapshot-window-close`). Both come back through the
replication stream at their place in the WAL: from the low watermark on, a streamed change of a
row of the chunk drops that row from the chunk (the stream carries its newer value); at the high
watermark the rest of the chunk is emitted (op `r`, `source.snapshot` = `incremental`) in the
watermark's transaction, with the offset saying the chunk is done, and the next chunk starts.
A crash before that transaction is in Kafka reads the chunk again from the stored last key.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from eosconnect.api.data import Struct
from eosconnect.api.records import Primitive
from eosconnect.connectors.postgres_cdc import catalog
from eosconnect.connectors.postgres_cdc.events import TableEvents
from eosconnect.connectors.postgres_cdc.incremental_state import ChunkWindow, IncrementalState, key_identity
from eosconnect.connectors.postgres_cdc.signals import (
    CLOSE_WINDOW,
    OPEN_WINDOW,
    BadSignal,
    ExecuteSnapshot,
    split_table,
)

__all__ = ["IncrementalSnapshot"]

log = logging.getLogger(__name__)

#: Builds a table's events from its catalog metadata (the task's settings applied).
EventsOf = Callable[[Any, catalog.TableMeta], TableEvents]


class IncrementalSnapshot:
    """The running incremental snapshot of one task: its state (None when none runs), the chunk
    in flight, and the SQL that reads chunks and writes watermarks on the task's catalog
    connection (`conn()`, which the task may replace after a reconnection)."""

    def __init__(
        self,
        prefix: str,
        conn: Callable[[], Any],
        signal_table: tuple[str, str] | None,
        chunk_size: int,
        key_columns: Mapping[str, tuple[str, ...]],
        events_of: EventsOf,
        state: IncrementalState | None,
    ) -> None:
        self.prefix = prefix
        self.conn = conn
        self.signal_table = signal_table
        self.chunk_size = chunk_size
        self.key_columns = key_columns
        self.events_of = events_of
        self.state = state
        self.window: ChunkWindow | None = None
        self.events: TableEvents | None = None  # the chunk's table's events
        self.pending = state is not None  # a chunk is to be started (after a restart: again)

    # ------------------------------------------------------------------------------ signals

    def execute(self, request: ExecuteSnapshot, captured: list[tuple[str, str]], why: str) -> None:
        if request.snapshot_type == "blocking":
            raise BadSignal(
                "data.type=blocking: blocking snapshots are not supported by PostgresCdcSource; send "
                "type incremental (the default), which reads the tables while streaming goes on"
            )
        names = [f"{s}.{t}" for s, t in captured]
        wanted = [n for n in names if request.matches(n)]
        if not wanted:
            raise BadSignal(
                f"data.data-collections {list(request.data_collections)} match none of the captured tables "
                f"({', '.join(names) or 'none'}); a table must be in table.include.list to be snapshotted"
            )
        if self.signal_table is None:
            raise BadSignal(
                "an incremental snapshot writes its watermarks to the signal table: set "
                "signal.data.collection to <schema>.<table> of a table (id VARCHAR(42) PRIMARY KEY, type "
                "VARCHAR(32) NOT NULL, data VARCHAR(2048)) in the publication"
            )
        conditions = {n: c for n, c in request.additional_conditions.items() if n in wanted}
        if self.state is None:
            self.state = IncrementalState(str(uuid.uuid4()), tuple(wanted), conditions)
            self.pending = True
        else:
            self.state = self.state.adding(wanted, conditions)
        log.info("PostgresCdcSource %s: incremental snapshot of %s %s", self.prefix, ", ".join(wanted), why)

    def stop(self, tables: list[str] | None) -> None:
        if self.state is None:
            log.info("PostgresCdcSource %s: stop-snapshot: no incremental snapshot runs", self.prefix)
            return
        if not tables:
            log.info(
                "PostgresCdcSource %s: incremental snapshot of %s stopped",
                self.prefix,
                ", ".join(self.state.tables),
            )
            self.state, self.window, self.pending = None, None, False
            return
        gone = [t for t in self.state.tables if any(_fullmatch(p, t) for p in tables)]
        current = self.state.current
        self.state = self.state.without(gone)
        if current in gone:
            self.window, self.pending = None, True
        if not self.state.tables:
            self.state, self.pending = None, False
        log.info(
            "PostgresCdcSource %s: incremental snapshot of %s stopped",
            self.prefix,
            ", ".join(gone) or "no table",
        )

    def pause(self) -> None:
        if self.state is not None:
            self.state = replace(self.state, paused=True)
            log.info("PostgresCdcSource %s: incremental snapshot paused at %s", self.prefix, self.progress())

    def resume(self) -> None:
        if self.state is not None and self.state.paused:
            self.state = replace(self.state, paused=False)
            self.pending = self.window is None
            log.info("PostgresCdcSource %s: incremental snapshot resumed at %s", self.prefix, self.progress())

    def read_chunk_again(self) -> None:
        """The connection was lost: the chunk in flight is read again once it is back, because its
        watermarks may never reach the stream (the connection broke between writing them, or a
        crashed server lost them). Its own watermarks, should they come, match no window then."""
        if self.state is not None:
            self.window, self.pending = None, not self.state.paused

    def progress(self) -> str:
        state = self.state
        if state is None:
            return "no snapshot"
        left = len(state.tables)
        return f"table {state.current} after key {list(state.last_key or ())} ({left} table(s) left)"

    # ------------------------------------------------------------------------------ chunks

    def offset(self) -> Mapping[str, Primitive]:
        return {} if self.state is None else self.state.offset()

    def start_chunk(self) -> None:
        """Open a window on the next chunk (low watermark, select, high watermark) when one is due."""
        self.pending = False
        state = self.state
        while state is not None and not state.paused and self.window is None:
            table = state.current
            if table is None:
                self.state = None
                return
            try:
                self.window = self._read_chunk(table, state)
            except BadSignal as exc:
                log.error(
                    "PostgresCdcSource %s: incremental snapshot skips table %s: %s", self.prefix, table, exc
                )
                state = self.state = state.after_chunk(None, table_done=True)
                if not state.tables:
                    self.state = None
                    log.info(
                        "PostgresCdcSource %s: incremental snapshot %s complete",
                        self.prefix,
                        state.correlation_id,
                    )
                    return

    def _read_chunk(self, table: str, state: IncrementalState) -> ChunkWindow:
        conn = self.conn()
        schema, name = split_table(table, "data-collections")
        meta = catalog.table_meta(conn, schema, name)
        key = self.key_columns.get(table) or meta.primary_key
        if not key:
            raise BadSignal(
                f"table {table} has no primary key: set message.key.columns (e.g. {table}:id) to the "
                "columns that identify its rows"
            )
        self.events = events = self.events_of(conn, meta)
        types = dict(
            conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s "
                "AND attnum > 0 AND NOT attisdropped",
                (meta.oid,),
            ).fetchall()
        )
        relation = catalog.qualified(schema, name)
        # Qualified: in ORDER BY a bare name would be the selected ::text column of that name.
        keys = ", ".join(f"{relation}.{catalog._ident(k)}" for k in key)
        condition = state.conditions.get(table)
        where_extra = f" AND ({condition})" if condition else ""
        if state.max_key is None:
            texts = ", ".join(f"{catalog._ident(k)}::text" for k in key)
            descending = ", ".join(f"{relation}.{catalog._ident(k)} DESC" for k in key)
            row = conn.execute(
                f"SELECT {texts} FROM {relation} WHERE TRUE{where_extra} ORDER BY {descending} LIMIT 1"
            ).fetchone()
            if row is None:  # empty: nothing to read
                return self._empty_window(table)
            state = self.state = replace(state, max_key=tuple(row))
        assert state.max_key is not None
        casts = ", ".join(f"%s::{types[k]}" for k in key)
        where = f"({keys}) <= ({casts}){where_extra}"
        params: list[Any] = list(state.max_key)
        if state.last_key is not None:
            where = f"({keys}) > ({casts}) AND " + where
            params = [*state.last_key, *params]
        from eosconnect.connectors.postgres_cdc.snapshot import _as_text

        chunk_id = f"{state.correlation_id}-{uuid.uuid4().hex[:8]}"
        self._watermark(chunk_id, OPEN_WINDOW)
        rows = conn.execute(
            f"SELECT {', '.join(_as_text(c) for c in meta.columns)} FROM {relation} WHERE {where} "
            f"ORDER BY {keys} LIMIT {self.chunk_size}",
            params,
        ).fetchall()
        self._watermark(chunk_id, CLOSE_WINDOW)
        names = [c.name for c in meta.columns]
        positions = [names.index(k) for k in key]
        by_key: dict[tuple[Any, ...], Struct] = {}
        for values in rows:
            after = events.row(values)
            identity = events.key(after)
            by_key[key_identity(identity._values if identity else [values[p] for p in positions])] = after
        last = tuple(rows[-1][p] for p in positions) if rows else state.last_key
        done = len(rows) < self.chunk_size or last == state.max_key
        return ChunkWindow(chunk_id, table, by_key, last, done)

    def _empty_window(self, table: str) -> ChunkWindow:
        chunk_id = f"{self.state.correlation_id if self.state else ''}-{uuid.uuid4().hex[:8]}"
        self._watermark(chunk_id, OPEN_WINDOW)
        self._watermark(chunk_id, CLOSE_WINDOW)
        return ChunkWindow(chunk_id, table, {}, None, True)

    def _watermark(self, chunk_id: str, kind: str) -> None:
        assert self.signal_table is not None
        suffix = "open" if kind == OPEN_WINDOW else "close"
        self.conn().execute(
            f"INSERT INTO {catalog.qualified(*self.signal_table)} (id, type, data) VALUES (%s, %s, %s)",
            (f"{chunk_id}-{suffix}", kind, f'{{"{suffix}WindowFor":"{chunk_id}"}}'),
        )

    def streamed(self, table: str, key: Struct | None) -> None:
        """A streamed change of `table` (`<schema>.<table>`) under `key`: it wins over the chunk."""
        window = self.window
        if window is not None and key is not None:
            window.streamed(table, key_identity(key._values))

    def watermark(self, kind: str, signal_id: str) -> tuple[TableEvents, list[Struct]] | None:
        """A watermark row reached in the stream; at the high watermark of the chunk in flight, the
        rows to emit (the state then says the chunk is done). None for any other watermark (one
        of a chunk a crash interrupted, written before this task started)."""
        window = self.window
        if window is None or not signal_id.startswith(window.chunk_id + "-"):
            return None
        if kind == OPEN_WINDOW:
            window.opened = True
            return None
        assert self.state is not None and self.events is not None
        self.window = None
        rows = list(window.rows.values())
        state = self.state.after_chunk(window.last_key, window.table_done)
        log.debug(
            "PostgresCdcSource %s: incremental snapshot chunk of %s: %d row(s) read, %d emitted, %d left to "
            "the stream",
            self.prefix, window.table, window.read, len(rows), window.read - len(rows),
        )  # fmt: skip
        if window.table_done:
            log.info(
                "PostgresCdcSource %s: incremental snapshot of table %s complete", self.prefix, window.table
            )
        if not state.tables:
            log.info(
                "PostgresCdcSource %s: incremental snapshot %s complete", self.prefix, state.correlation_id
            )
            self.state = None
        else:
            self.state, self.pending = state, True
        return self.events, rows


def _fullmatch(pattern: str, name: str) -> bool:
    import re

    try:
        return re.fullmatch(pattern, name) is not None
    except re.error:
        return pattern == name
