"""JdbcSource's task: polls its tables in turn, one query per poll, and commits heartbeats (KIP-910).

The behaviour is described with the connector (connectors/jdbc/connector.py); the statements are
built in `queries`, and rows and offsets are mapped in `values` and `schema`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from eosconnect.api.data import Schema, field_changes
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import Primitive, SourceOffset, SourcePartition, SourceRecord
from eosconnect.api.source import (
    SourceTask,
)
from eosconnect.connectors.jdbc.config import (
    CONFIG_DEF,
    HEARTBEAT_FIELD,
    INCREMENTING_FIELD,
    TABLE_FIELD,
    TASK_TABLES_KEY,
    TIMESTAMP_FIELD,
    VERSION,
    Mode,
    table_names,
)
from eosconnect.connectors.jdbc.database import connection_lost, create_engine_for, reflect_table, safe_url
from eosconnect.connectors.jdbc.queries import Shape, fetch, next_rows, whole_timestamps
from eosconnect.connectors.jdbc.schema import (
    DriverRows,
    NumericMapping,
    RowSchema,
    UnconvertibleValue,
    key_schema_for,
    row_schema,
)
from eosconnect.connectors.jdbc.values import (
    TsKind,
    after,
    number,
    read_bound,
    timestamp_kind,
    ts_from_offset,
    ts_to_offset,
)

__all__ = ["JdbcSourceTask"]

#: The longest a `poll()` blocks while no table is due.
MAX_IDLE_WAIT_S = 0.5

#: Queries in a row a poll runs while a table's columns change between its query and its reflection.
_FOLLOW_ATTEMPTS = 3

log = logging.getLogger(__name__)


@dataclass
class _TableState:
    name: str
    table: Any
    topic: str
    partition: SourcePartition
    rows: RowSchema | None = None  # the value schema; set once the timestamp kind is known
    key_schema: Schema | None = None
    shape: Shape | None = None  # the query result's columns `rows` was built for (None: no poll yet)
    ts_kind: TsKind | None = None
    ts_aware: bool = False
    incrementing: Any = None  # last id read (None: nothing read yet)
    timestamp: Any = None  # last timestamp read, as bound in queries (None: nothing read yet)
    next_poll: float = 0.0
    # The read bound of the latest poll that found the table complete, and its wall-clock time
    # (ms); None while the latest poll returned a full batch.
    complete_until: Any = None
    complete_at_ms: int | None = None
    uncommitted: int = 0  # records returned by poll() whose offsets are not committed yet
    last_offset_commit: float = field(default_factory=time.monotonic)


class JdbcSourceTask(SourceTask):
    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        values = CONFIG_DEF.parse(config)
        self.mode = Mode(values["mode"])
        self.inc_column: str = values["incrementing.column.name"]
        self.ts_column: str = values["timestamp.column.name"]
        self.prefix: str = values["topic.prefix"]
        self.poll_interval_s = values["poll.interval.ms"] / 1000
        self.batch_max_rows: int = values["batch.max.rows"]
        self.heartbeat_interval_s = values["heartbeat.interval.ms"] / 1000
        self.delay = dt.timedelta(milliseconds=values["timestamp.delay.interval.ms"])
        self.zone = ZoneInfo(values["db.timezone"])
        self.numeric_mapping = NumericMapping(values["numeric.mapping"])
        self.attempts: int = values["connection.attempts"]
        self.backoff_s = values["connection.backoff.ms"] / 1000
        self.url = safe_url(values)
        names = json.loads(config[TASK_TABLES_KEY]) if TASK_TABLES_KEY in config else table_names(values)
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._failures = 0
        self.engine = create_engine_for(values)
        self.tables: dict[str, _TableState] = {}
        partitions = [SourcePartition({TABLE_FIELD: name}) for name in names]
        stored = self.context.offset_storage_reader.offsets(partitions)
        for name, partition in zip(names, partitions, strict=True):
            table = self._call_retrying(
                lambda name=name: reflect_table(self.engine, name), f"reading {name!r}"
            )
            state = _TableState(name, table, self.prefix + name, partition)
            if self.mode.uses_timestamp:
                state.ts_kind, state.ts_aware = timestamp_kind(
                    table.columns[self.ts_column].type, self.engine.dialect.name
                )
            self._build(state, table)
            self._restore(state, stored.get(partition))
            self.tables[name] = state
        log.info(
            "JdbcSource task: %s from %s",
            ", ".join(self._describe(s) for s in self.tables.values()) or "no tables",
            self.url,
        )

    def _build(self, state: _TableState, table: Any, shape: Shape | None = None) -> None:
        """The table's schema, converters and key schema from its reflected columns (and, once
        polled, from the shape of the query result the rows come in)."""
        state.table = table
        state.shape = shape
        state.rows = row_schema(
            state.name,
            list(table.columns),
            dialect=self.engine.dialect.name,
            numeric_mapping=self.numeric_mapping,
            zone=self.zone,
            text_columns=frozenset({self.ts_column} if state.ts_kind is TsKind.TEXT else ()),
            driver_rows=None
            if shape is None
            else DriverRows(self.engine.dialect, {column[0]: column[1] for column in shape}),
        )
        if self.inc_column:
            state.key_schema = key_schema_for(state.rows.field_schema(self.inc_column))

    def _describe(self, state: _TableState) -> str:
        if state.incrementing is None and state.timestamp is None:
            return f"{state.name} from the start"
        return f"{state.name} after {self._position(state)}"

    # ------------------------------------------------------------------------------------ offsets

    def _restore(self, state: _TableState, offset: Mapping[str, Primitive] | None) -> None:
        if not offset:
            return
        inc = offset.get(INCREMENTING_FIELD)
        if inc is not None and (isinstance(inc, bool) or not isinstance(inc, int | float)):
            raise ConnectException(
                f"the stored offset of table {state.name!r} is {dict(offset)!r}: {INCREMENTING_FIELD!r} must "
                "be a number. Reset the connector's offsets for this table."
            )
        state.incrementing = inc if self.mode.uses_incrementing else None
        if self.mode.uses_timestamp:
            raw = offset.get(TIMESTAMP_FIELD)
            try:
                state.timestamp = None if raw is None else ts_from_offset(state.ts_kind, raw)
            except (TypeError, ValueError) as exc:
                raise ConnectException(
                    f"the stored offset of table {state.name!r} is {dict(offset)!r}: cannot read its "
                    f"{TIMESTAMP_FIELD!r} ({exc}). Reset the connector's offsets for this table."
                ) from exc

    def _position(
        self, state: _TableState, incrementing: Any = None, timestamp: Any = None
    ) -> dict[str, Primitive]:
        """The offset for a position (the table's current one unless given)."""
        if incrementing is None and timestamp is None:
            incrementing, timestamp = state.incrementing, state.timestamp
        offset: dict[str, Primitive] = {}
        if self.mode.uses_timestamp:
            offset[TIMESTAMP_FIELD] = ts_to_offset(state.ts_kind, timestamp)
        if self.mode.uses_incrementing:
            offset[INCREMENTING_FIELD] = number(incrementing)
        return offset

    # ------------------------------------------------------------------------------------ polling

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.is_set() or not self.tables:
            self._stopping.wait(MAX_IDLE_WAIT_S)
            return None
        state = min(self.tables.values(), key=lambda s: s.next_poll)
        wait = state.next_poll - time.monotonic()
        if wait > 0:
            self._stopping.wait(min(wait, MAX_IDLE_WAIT_S))
            return None
        try:
            rows, bound, complete = self._query(state)
            polled_ms = int(time.time() * 1000)
            records, incrementing, timestamp = self._records(state, rows)
        except _Retry:
            return None
        # One step, so that update_offsets (maybe on another thread) never sees a position that is
        # ahead of the records handed to the runtime, nor a half-updated one.
        with self._lock:
            state.incrementing, state.timestamp = incrementing, timestamp
            state.uncommitted += len(records)
            state.complete_until, state.complete_at_ms = (bound, polled_ms) if complete else (None, None)
        state.next_poll = time.monotonic() + (self.poll_interval_s if complete else 0)
        if not records:
            return None
        txn = self.context.transaction_context
        if txn is not None:
            txn.commit_transaction(records[-1])  # one transaction per table poll
        return records

    def _records(self, state: _TableState, rows: list[dict[str, Any]]) -> tuple[list[SourceRecord], Any, Any]:
        """The rows as records, and the position after the last. A value its column's type cannot
        hold is worth one look at the table: a column retyped where the result's shape says
        nothing of it (SQLite) is followed here; otherwise the task fails naming the value."""
        try:
            return self._convert(state, rows)
        except UnconvertibleValue as exc:
            assert state.shape is not None
            if not self._follow(state, state.shape):
                raise ConnectException(str(exc)) from None
        try:
            return self._convert(state, rows)
        except UnconvertibleValue as exc:
            raise ConnectException(str(exc)) from None

    def _convert(self, state: _TableState, rows: list[dict[str, Any]]) -> tuple[list[SourceRecord], Any, Any]:
        incrementing, timestamp = state.incrementing, state.timestamp
        records = []
        for row in rows:
            if self.mode.uses_incrementing:
                incrementing = row[self.inc_column]
            if self.mode.uses_timestamp:
                timestamp = row[self.ts_column]
            records.append(self._record(state, row, self._position(state, incrementing, timestamp)))
        return records, incrementing, timestamp

    def _record(
        self, state: _TableState, row: Mapping[str, Any], offset: dict[str, Primitive]
    ) -> SourceRecord:
        assert state.rows is not None
        return SourceRecord(
            source_partition=state.partition,
            source_offset=offset,
            topic=state.topic,
            key=number(row[self.inc_column]) if self.inc_column else None,
            value=state.rows.struct(row),
            key_schema=state.key_schema,
            value_schema=state.rows.schema,
        )

    def _query(self, state: _TableState) -> tuple[list[dict[str, Any]], Any, bool]:
        """The next rows of a table, the read bound used, and whether the table is now complete
        (the query returned fewer than batch.max.rows rows: every row up to the bound is read).

        A result whose shape differs from the one the table's schema was built for means the
        table changed: its schema follows before these rows are converted, so the rows of the poll
        that notices a change already carry the new schema."""
        limit = self.batch_max_rows
        bound = (
            read_bound(state.ts_kind, state.ts_aware, self.delay, self.zone)
            if self.mode.uses_timestamp
            else None
        )
        stmt, ts = next_rows(
            state.table,
            self.mode,
            inc_column=self.inc_column,
            ts_column=self.ts_column,
            ts_kind=state.ts_kind,
            incrementing=state.incrementing,
            timestamp=state.timestamp,
            bound=bound,
        )

        def run() -> tuple[Shape, list[dict[str, Any]], bool]:
            with self.engine.connect() as conn:
                shape, rows = fetch(conn, stmt.limit(limit))
                full = len(rows) >= limit
                if self.mode is Mode.TIMESTAMP and full:
                    rows = whole_timestamps(conn, stmt, ts, self.ts_column, rows)
                return shape, rows, full

        for _ in range(_FOLLOW_ATTEMPTS):
            try:
                shape, rows, full = self._call(run, f"polling table {state.name!r}")
            except (ConnectException, _Retry):
                self._explain_failed_query(state)
                raise
            if shape == state.shape or self._follow(state, shape) is not None:
                return rows, bound, not full
        raise _Retry  # the table keeps changing between a query and its reflection: next poll

    def _follow(self, state: _TableState, shape: Shape) -> list[str] | None:
        """Rebuild the table's schema from its columns now, for results of `shape`: the changes
        to its fields, or None when the table's columns differ from the shape (the table changed again
        after the query: query again)."""
        table = self._reflect(state)
        if [column.name for column in table.columns] != [column[0] for column in shape]:
            return None
        self._check_mode_columns(state, table)
        assert state.rows is not None
        before = state.rows.schema
        self._build(state, table, shape)
        changes = field_changes(before, state.rows.schema)
        if changes:
            log.info(
                "table %r changed: %s; its records carry the new schema from this poll on",
                state.name,
                ", ".join(changes),
            )
        return changes

    def _explain_failed_query(self, state: _TableState) -> None:
        """A failed query may have lost a column it filters or orders by (SQLite reports that as an
        OperationalError, which would be retried as if the connection were lost): say so."""
        try:  # not through _call: it would count this success against the failed query's retries
            table = reflect_table(self.engine, state.name)
        except Exception:  # the query's own error says more than this one
            return
        self._check_mode_columns(state, table)

    def _reflect(self, state: _TableState) -> Any:
        return self._call(
            lambda: reflect_table(self.engine, state.name), f"reading the columns of {state.name!r}"
        )

    def _check_mode_columns(self, state: _TableState, table: Any) -> None:
        """The mode's columns must outlive any change: rows are found and ordered by them."""
        for setting, column in (
            ("incrementing.column.name", self.inc_column),
            ("timestamp.column.name", self.ts_column if self.mode.uses_timestamp else ""),
        ):
            if column and column not in table.columns:
                raise ConnectException(
                    f"table {state.name!r} has no column {column!r} any more (its columns: "
                    f"{', '.join(c.name for c in table.columns)}), and {setting}={column} finds its new "
                    f"rows. Restore the column, or set {setting} to another column and reset the "
                    "connector's offsets for this table."
                )
        if self.mode.uses_timestamp:
            kind = timestamp_kind(table.columns[self.ts_column].type, self.engine.dialect.name)
            if kind != (state.ts_kind, state.ts_aware):
                raise ConnectException(
                    f"the timestamp column {self.ts_column!r} of table {state.name!r} changed type (now "
                    f"{table.columns[self.ts_column].type}), so the stored position cannot be compared "
                    "with its values. Reset the connector's offsets for this table to read it again."
                )

    def _call(self, fn: Any, doing: str) -> Any:
        """Run a database call. A transient failure (connection lost, database locked) waits
        connection.backoff.ms and raises `_Retry`; after connection.attempts in a row, or on any
        other error, the task fails."""
        from sqlalchemy.exc import DBAPIError

        try:
            result = fn()
        except DBAPIError as exc:
            transient = connection_lost(exc)
            self._failures += 1
            reason = str(exc).splitlines()[0]
            if not transient or self._failures >= self.attempts:
                raise ConnectException(
                    f"database error while {doing} on {self.url} ({self._failures} consecutive failure(s), "
                    f"connection.attempts={self.attempts}): {reason}"
                ) from exc
            log.warning(
                "database error while %s (attempt %d of %d), retrying: %s",
                doing,
                self._failures,
                self.attempts,
                reason,
            )
            self._stopping.wait(self.backoff_s)
            raise _Retry from exc
        self._failures = 0
        return result

    def _call_retrying(self, fn: Any, doing: str) -> Any:
        while True:
            try:
                return self._call(fn, doing)
            except _Retry:
                if self._stopping.is_set():
                    raise ConnectException(f"stopped while {doing}") from None

    # ------------------------------------------------------------------------------------ commits

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        state = self.tables.get(str(record.source_partition.get(TABLE_FIELD)))
        if state is not None:
            with self._lock:
                state.uncommitted = max(0, state.uncommitted - 1)

    def update_offsets(
        self, offsets: dict[SourcePartition, SourceOffset]
    ) -> Mapping[SourcePartition, Mapping[str, Primitive]] | None:
        """KIP-910 heartbeat: commit offsets for tables that produced no rows in this commit.

        KIP-910's case is a CDC source whose position (an LSN, a binlog position) keeps moving
        while the tracked tables are quiet: the connector commits the *current source position*
        for the quiet partitions so that their offsets stay fresh and a restart re-reads as little
        as possible. For a table polled by query, the position up to which the source has been
        read is the read bound of the last poll that found the table complete (it returned fewer
        than `batch.max.rows` rows): every row up to that bound has been emitted.

        * Timestamp modes: the offset advances to that bound, `{"timestamp": <bound>,
          "incrementing": null}` (null: every row with this timestamp was read), so a restart
          resumes from the bound rather than from the last row, however long ago that was.
        * Incrementing mode: nothing advances a position made of row ids without new rows. Jumping
          to the current `MAX(id)` would be wrong: an id above the last one read belongs to a row
          not read yet (inserted since the poll), and skipping it loses data. So the last id read
          is committed again.

        Either way the offset carries `"heartbeat": <epoch ms of that poll>`, the time up to which
        the table is known complete (it is ignored on resume). A heartbeat is sent for a table at
        most every `heartbeat.interval.ms`, only while all of its records returned by `poll()` are
        committed (at-least-once mode calls this before in-flight records are acknowledged, and
        moving past them could lose them), and only for tables polled since the task started.

        When the runtime calls this: under exactly-once at every transaction commit (with
        `transaction.boundary=connector`, after each table poll that returned rows; with
        `interval`, also at the end of intervals without any rows, so heartbeats go on while every
        table is idle), and at every offset flush in at-least-once mode.
        """
        if self.heartbeat_interval_s <= 0:
            return None
        now = time.monotonic()
        heartbeats: dict[SourcePartition, dict[str, Primitive]] = {}
        with self._lock:
            for state in self.tables.values():
                if state.partition in offsets:
                    state.last_offset_commit = now
                    continue
                if (
                    state.complete_at_ms is None
                    or state.uncommitted
                    or now - state.last_offset_commit < self.heartbeat_interval_s
                ):
                    continue
                heartbeats[state.partition] = self._heartbeat_offset(state)
                state.last_offset_commit = now
        if not heartbeats:
            return None
        return {**offsets, **heartbeats}

    def _heartbeat_offset(self, state: _TableState) -> dict[str, Primitive]:
        offset = self._position(state)
        bound = state.complete_until
        if self.mode.uses_timestamp and bound is not None and after(bound, state.timestamp):
            offset[TIMESTAMP_FIELD] = ts_to_offset(state.ts_kind, bound)
            if self.mode is Mode.TIMESTAMP_INCREMENTING:
                offset[INCREMENTING_FIELD] = None
        offset[HEARTBEAT_FIELD] = state.complete_at_ms
        return offset

    def stop(self) -> None:
        self._stopping.set()
        engine = self.__dict__.get("engine")
        if engine is not None:
            engine.dispose()


class _Retry(Exception):
    """A transient database failure: return nothing from this poll and try again later."""
