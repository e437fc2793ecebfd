"""One flush of JdbcSink = one database transaction: the buffered rows, then the positions.

Rows are written in the order they were consumed, cut into runs of one shape (table, operation,
columns) so that each run is one bulk statement (executemany, `batch.size` rows at most; into
PostgreSQL a run of plain inserts is one COPY instead, and a run of upserts one COPY into a temporary
table merged by one INSERT .. SELECT .. ON CONFLICT): an upsert followed by a delete of the same key
stays in that order. With exactly once the transaction first
locks the partitions' rows of the offsets table and leaves out every partition another task claimed
since (see `offsets_table`); its rows are dropped here and written by that task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from eosconnect.api.records import OffsetAndMetadata, TopicPartition
from eosconnect.connectors.jdbc import connection_lost
from eosconnect.connectors.jdbc_sink.config import SinkSettings
from eosconnect.connectors.jdbc_sink.dialect import Tables, transactional_engine, write_statement
from eosconnect.connectors.jdbc_sink.offsets_table import OffsetsTable
from eosconnect.connectors.jdbc_sink.rows import Row, Shape
from eosconnect.runtime.wall_time import WallTime

__all__ = ["FlushResult", "RowWriter"]

log = logging.getLogger(__name__)

#: Runs of inserts or upserts at least this long go to PostgreSQL by COPY (see `RowWriter._copy`).
COPY_MIN_ROWS = 2


@dataclass
class FlushResult:
    """What a flush committed, and the partitions it left out because a newer task claimed them."""

    rows: int = 0
    committed: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    fenced: dict[TopicPartition, int] = field(default_factory=dict)


class RowWriter:
    """Buffers rows and writes them (with the positions, exactly once) in one transaction per flush."""

    def __init__(self, settings: SinkSettings, connector: str) -> None:
        self.settings = settings
        self.engine = transactional_engine(settings.values)
        self.tables = Tables(
            self.engine,
            quote=settings.quote,
            auto_create=settings.auto_create,
            auto_evolve=settings.auto_evolve,
        )
        self.offsets: OffsetsTable | None = None
        if settings.exactly_once:
            self.offsets = OffsetsTable(settings.offsets_table, connector)
            self.offsets.create(self.engine)
        #: Partition -> the generation this task claimed it with (exactly once).
        self.generations: dict[TopicPartition, int] = {}
        self.buffer: list[Row] = []
        #: Temporary tables made so far (each upsert run by COPY has its own, see `_copy_upsert`).
        self._staged = 0
        #: Where a flush's wall time goes (DDL checks, offset locks, rows, positions, the commit).
        self.wall = WallTime()

    # ----------------------------------------------------------------------------- partitions
    def claim(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """Fence earlier holders of these partitions; the positions they resume from (if any)."""
        if self.offsets is None:
            return {}
        claims = self.offsets.claim(self.engine, partitions)
        self.generations.update({tp: c.generation for tp, c in claims.items()})
        return {tp: c.position for tp, c in claims.items() if c.position is not None}

    def release(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget these partitions and their unwritten rows (their next holder writes them)."""
        gone = set(partitions)
        for tp in gone:
            self.generations.pop(tp, None)
        self.buffer = [r for r in self.buffer if r.topic_partition not in gone]

    # ----------------------------------------------------------------------------- writes
    def add(self, row: Row) -> None:
        self.buffer.append(row)

    def flush(
        self,
        positions: Mapping[TopicPartition, OffsetAndMetadata],
        on_rejected: Callable[[list[tuple[Row, Exception]]], None] | None = None,
    ) -> FlushResult:
        """Write the buffered rows of these partitions and (exactly once) their positions, atomically.

        A lost connection (the database restarted, a network blip, or it ended a session that sat
        idle in its transaction past `idle.transaction.timeout.ms`: a task frozen mid-flush, whose
        successor may have claimed its partitions meanwhile) is retried `connection.attempts`
        times, `connection.backoff.ms` apart. Exactly once, a retry first looks whether the failed
        attempt committed after all (its acknowledgement lost with the connection): partitions whose
        stored position already reached the wanted one are not written again."""
        wanted = set(positions)
        rows, _ = _split(self.buffer, wanted)
        checked: set[Shape] = set()
        with self.wall.phase("ddl"):
            last = None
            for row in rows:  # DDL first, in transactions of its own (SQLite: one writer at a time)
                shape = row.shape
                if shape is not last and shape not in checked:  # rows of one schema share their shape
                    checked.add(shape)
                    self.tables.table(shape.table, shape.columns, shape.key)
                last = shape
        attempts = int(self.settings.values["connection.attempts"])
        backoff_s = int(self.settings.values["connection.backoff.ms"]) / 1000
        for attempt in range(1, attempts + 1):
            try:
                try:
                    result = self._flush_once(positions, rows, retry=attempt > 1)
                except sa.exc.IntegrityError:
                    if on_rejected is None:
                        raise
                    result = self._flush_once(positions, rows, retry=attempt > 1, on_rejected=on_rejected)
                break
            except sa.exc.DBAPIError as exc:
                if not connection_lost(exc) or attempt == attempts:
                    raise
                log.warning(
                    "writing %d rows failed (attempt %d of connection.attempts=%d), retrying in %.1fs: %s",
                    len(rows),
                    attempt,
                    attempts,
                    backoff_s,
                    str(exc).splitlines()[0],
                )
                time.sleep(backoff_s)
        self.buffer = _split(self.buffer, wanted)[1]
        for tp in result.fenced:
            self.generations.pop(tp, None)
        return result

    def _flush_once(
        self,
        positions: Mapping[TopicPartition, OffsetAndMetadata],
        rows: list[Row],
        *,
        retry: bool,
        on_rejected: Callable[[list[tuple[Row, Exception]]], None] | None = None,
    ) -> FlushResult:
        result = FlushResult()
        wall = self.wall
        begun = time.perf_counter()
        with self.engine.begin() as conn:
            done: set[TopicPartition] = set()
            if self.offsets is not None:
                current = self.offsets.lock(conn, positions)
                wall.add("begin + lock offsets", time.perf_counter() - begun)
                result.fenced = {
                    tp: current[tp].generation if tp in current else 0
                    for tp in positions
                    if tp not in self.generations
                    or tp not in current
                    or current[tp].generation != self.generations[tp]
                }
                if retry:  # did the attempt that lost its connection commit after all?
                    done = {
                        tp
                        for tp, om in positions.items()
                        if tp not in result.fenced
                        and (stored_offset := current[tp].offset) is not None
                        and stored_offset >= om.offset
                    }
                if result.fenced or done:
                    rows = _split(rows, set(result.fenced) | done)[1]
            if on_rejected is None:
                with wall.phase("write rows"):
                    result.rows = self._write_rows(conn, rows)
            else:
                rejected = self._write_one_by_one(conn, rows)
                result.rows = len(rows) - len(rejected)
                if rejected:
                    on_rejected(rejected)
            result.committed = {tp: om for tp, om in positions.items() if tp not in result.fenced}
            if self.offsets is not None:
                stored = {tp: om for tp, om in result.committed.items() if tp not in done}
                with wall.phase("write offsets"):
                    self.offsets.write(conn, stored)
            committing = time.perf_counter()
        wall.add("db commit", time.perf_counter() - committing)
        return result

    def _write_rows(self, conn: sa.Connection, rows: list[Row]) -> int:
        written = 0
        run: list[Row] = []
        shape = None
        batch_size = self.settings.batch_size
        for row in rows:
            if run and ((row.shape is not shape and row.shape != shape) or len(run) >= batch_size):
                written += self._execute(conn, run)
                run = []
            if not run:
                shape = row.shape
            run.append(row)
        if run:
            written += self._execute(conn, run)
        return written

    def _write_one_by_one(self, conn: sa.Connection, rows: list[Row]) -> list[tuple[Row, Exception]]:
        """Each row in a savepoint of its own; the rows the database refused, with its error."""
        rejected: list[tuple[Row, Exception]] = []
        for row in rows:
            try:
                with conn.begin_nested():
                    self._execute(conn, [row])
            except sa.exc.IntegrityError as exc:
                rejected.append((row, exc))
        return rejected

    def _execute(self, conn: sa.Connection, run: list[Row]) -> int:
        shape = run[0].shape
        operation = shape.operation.value
        if len(run) >= COPY_MIN_ROWS and operation in ("insert", "upsert") and self._copy_possible(conn):
            if operation == "insert":
                self._copy(conn, run, self.tables.known(shape.table))
                return len(run)
            if shape.values:  # upserts with columns to update: COPY into a temporary table, then merge
                self._copy_upsert(conn, run)
                return len(run)
        stmt = write_statement(
            self.engine.dialect.name,
            self.tables.known(shape.table),
            operation,
            list(shape.key),
            list(shape.values),
        )
        if stmt is None:
            return 0
        conn.execute(stmt, self._params(run))
        return len(run)

    def _params(self, run: list[Row]) -> list[dict[str, Any]]:
        """The rows as `write_statement`'s bind parameters, for executemany."""
        shape = run[0].shape
        names = [*(f"k_{k}" for k in shape.key), *(f"v_{v}" for v in shape.values)]
        return [dict(zip(names, _bound(row), strict=True)) for row in run]

    def _copy_possible(self, conn: sa.Connection) -> bool:
        """PostgreSQL through psycopg 3, whose cursors have `copy` (psycopg2's have not)."""
        if self.engine.dialect.name != "postgresql":
            return False
        raw = conn.connection.driver_connection
        return raw is not None and type(raw).__module__.split(".")[0] == "psycopg"

    def _copy_upsert(self, conn: sa.Connection, run: list[Row]) -> None:
        """Upserts into PostgreSQL as one COPY into a temporary table (dropped at commit) and one
        `INSERT .. SELECT .. ON CONFLICT (key) DO UPDATE`: two statements per run instead of a round
        of the pipeline per row (executemany), several times faster. One statement may not update a
        row twice, so of several rows with one key only the last consumed is kept: the same end
        state as upserting them one after the other (each sets every non-key column)."""
        first = run[0].shape
        target = self.tables.known(first.table)
        latest: dict[tuple[Any, ...], Row] = {}
        try:
            for row in run:
                latest[row.key] = row
        except TypeError:  # an unhashable key value: leave it to executemany
            stmt = write_statement("postgresql", target, "upsert", list(first.key), list(first.values))
            conn.execute(stmt, self._params(run))
            return
        preparer = self.engine.dialect.identifier_preparer
        names = [*first.key, *first.values]
        columns = ", ".join(preparer.quote(name) for name in names)
        self._staged += 1
        staging = f"eosconnect_upsert_{self._staged}"
        conn.exec_driver_sql(
            f"CREATE TEMPORARY TABLE {staging} ON COMMIT DROP AS "
            f"SELECT {columns} FROM {preparer.format_table(target)} WITH NO DATA"
        )
        self._copy(conn, list(latest.values()), staging)
        keys = ", ".join(preparer.quote(name) for name in first.key)
        updates = ", ".join(f"{preparer.quote(n)} = EXCLUDED.{preparer.quote(n)}" for n in first.values)
        conn.exec_driver_sql(
            f"INSERT INTO {preparer.format_table(target)} ({columns}) SELECT {columns} FROM {staging} "
            f"ON CONFLICT ({keys}) DO UPDATE SET {updates}"
        )

    def _copy(self, conn: sa.Connection, run: list[Row], table: sa.Table | str) -> None:
        """Rows into `table` (a target table, or the name of a temporary one) through psycopg 3 as
        one `COPY .. FROM STDIN` (several times faster than executemany, which costs a round of the
        pipeline per row)."""
        raw = conn.connection.driver_connection
        assert raw is not None
        first = run[0].shape
        preparer = self.engine.dialect.identifier_preparer
        name = table if isinstance(table, str) else preparer.format_table(table)
        columns = ", ".join(preparer.quote(column) for column in (*first.key, *first.values))
        statement = f"COPY {name} ({columns}) FROM STDIN"
        dbapi_error = type(raw).__module__.split(".")[0]  # "psycopg"
        try:
            with raw.cursor() as cursor, cursor.copy(statement) as copy:
                write_row = copy.write_row
                if first.writers is None:  # the schemas say every value goes as it is
                    if not first.key:
                        for row in run:
                            write_row(row.values)
                    else:
                        for row in run:
                            write_row(row.key + row.values)
                else:
                    for row in run:
                        write_row(_bound(row))
        except Exception as exc:
            base = getattr(__import__(dbapi_error), "Error", None)
            if base is None or not isinstance(exc, base):
                raise
            # As SQLAlchemy reports a driver error (IntegrityError, OperationalError, ...), so the
            # callers' handling (row-by-row retry, reconnect) is the same as for executemany.
            lost = bool(getattr(raw, "closed", False))
            if lost:
                conn.invalidate(exc)
            raise sa.exc.DBAPIError.instance(statement, None, exc, base, connection_invalidated=lost) from exc

    def close(self) -> None:
        self.engine.dispose()


def _bound(row: Row) -> list[Any] | tuple[Any, ...]:
    """A row's values (key columns', then the others') as the driver takes them."""
    values = row.key + row.values
    writers = row.shape.writers
    if writers is None:
        return values
    return [v if w is None or v is None else w(v) for v, w in zip(values, writers, strict=True)]


def _split(rows: list[Row], partitions: set[TopicPartition]) -> tuple[list[Row], list[Row]]:
    """The rows of these partitions, and the others, each in order. A partition's rows share one
    `TopicPartition` object (see `RowMaker`), so runs of them are looked up once, not per row."""
    inside: list[Row] = []
    outside: list[Row] = []
    last: TopicPartition | None = None
    target = outside
    for row in rows:
        tp = row.topic_partition
        if tp is not last:
            last = tp
            target = inside if tp in partitions else outside
        target.append(row)
    return inside, outside
