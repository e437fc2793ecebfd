"""`JdbcSink` (also `io.confluent.connect.jdbc.JdbcSinkConnector`): Kafka records into database tables.

Settings and behaviour follow Confluent's JDBC sink, with SQLAlchemy URLs (PostgreSQL through psycopg,
MariaDB through PyMySQL, e.g. mysql+pymysql://app@db:3306/shop, and SQLite are tested; other
SQLAlchemy dialects should work, upserts need PostgreSQL, SQLite or MySQL/MariaDB; on MySQL/MariaDB a
string or bytes key column is created as VARCHAR/VARBINARY(256)). Each record becomes a row of the
table `table.name.format` names: a `Struct` value
(a converter with schemas, e.g. the default `JsonConverter`, `schemas.enable=true`) gives columns and types
from its schema (INT8/16 SMALLINT, INT32 INTEGER, INT64 BIGINT, FLOAT32 REAL, FLOAT64 DOUBLE, BOOLEAN,
STRING TEXT, BYTES binary, logical Decimal NUMERIC(38, scale), Date DATE, Time TIME, Timestamp
TIMESTAMP written in `db.timezone`; nested values as JSON text); a schemaless JSON object gives
columns by its keys, typed from its values. `pk.mode` picks the primary key columns, `insert.mode`
the statement (INSERT, upsert by INSERT .. ON CONFLICT / ON DUPLICATE KEY, UPDATE), and with
`delete.enabled` a tombstone deletes the row with the record's key. `auto.create` creates a missing
table with that primary key, `auto.evolve` adds missing columns (nullable). Rows are written in bulk
(executemany, up to `batch.size` rows per statement; into PostgreSQL through psycopg, plain inserts
as one COPY, upserts as one COPY into a temporary table and one INSERT .. SELECT .. ON CONFLICT), in
consumption order.

**Sinks, exactly once.** No other Kafka Connect JDBC sink can be exactly once: they commit the
consumer group's offsets after the database commit, so a crash between the two repeats rows (upserts
on a key hide it; append-only tables and tables without keys get duplicates). With `exactly.once=true`
(the default) the database is the source of truth for the positions, as the target cluster is for
KIP-656's Kafka sinks:

- The offsets table (`offsets.table.name`, default `eosconnect_sink_offsets`, created if missing)
  holds one row per connector, topic and partition: `kafka_offset` (the next offset to read),
  `leader_epoch` (of the record before it) and `generation`.
- `put` only buffers rows. Each flush (once `batch.size` rows wait, once the consumer has no more
  records queued, else every `offset.flush.interval.ms`) is one database transaction: it locks the
  partitions' rows of the offsets table
  (`SELECT .. FOR UPDATE`; SQLite takes the database's write lock with `BEGIN IMMEDIATE`), writes the
  rows, updates the positions, commits. A crash before the commit loses the whole transaction, and
  the positions with it; a crash after it keeps both. Either way nothing is lost or repeated, in every
  `insert.mode`, with or without a primary key.
- A task that is assigned a partition (start, rebalance, Spark retry) raises its `generation` and
  resumes from the stored position (`context.offset`, with the leader epoch, so the runtime checks the
  position against the partition's log as for any sink, KIP-320, per `log.truncation.policy`). Every
  flush writes only partitions whose generation is still the one the task raised: a zombie (a
  SIGSTOPped task that wakes up after its partitions moved, a Spark task retried while the old
  attempt still runs) can no longer commit; its rows for those partitions are dropped (the new holder
  writes them) and the partitions paused, with a warning. No worker setting is needed for this
  (`exactly.once.source.support` is not involved): the fencing lives in the database.
- A task *frozen* inside a flush (SIGSTOP, a paused machine) holds the offsets rows' locks, which
  its successor's claim waits for. PostgreSQL and MariaDB (>= 10.3) end such a session after
  `idle.transaction.timeout.ms` (default 30 s; `idle_in_transaction_session_timeout`,
  `idle_transaction_timeout`), which releases the locks; woken up, the task's commit fails and its
  retry finds itself fenced. Meanwhile the claim logs every 5 s which sessions hold the locks
  (PostgreSQL: pid, state, application_name, client). Limits: MySQL has no such timeout (the claim
  waits, logging each `innodb_lock_wait_timeout`, until the frozen session goes); a task frozen in
  the middle of sending a COPY is "active", not idle, and is ended only by `statement_timeout` if
  the database user has one; SQLite's write lock stays with a stopped process until it ends.
- The consumer group `connect-<name>` still gets the positions after each flush, as information
  (consumer lag tools keep working); a failure to write them is only a warning. `PATCH` and `DELETE
  /connectors/<name>/offsets` of the stopped connector change the offsets table (and the group).
- The database user needs, besides writing the target tables (`INSERT`, plus `UPDATE` for upsert and
  update modes, `DELETE` with `delete.enabled`, `CREATE`/`ALTER` with `auto.create`/`auto.evolve`):
  `CREATE` on the schema once (or create the offsets table beforehand with the columns above and
  the primary key (connector, kafka_topic, kafka_partition)), then `SELECT`, `INSERT`, `UPDATE` and
  row locks (`SELECT .. FOR UPDATE`, which PostgreSQL grants with `UPDATE`) on the offsets table.

With `exactly.once=false` delivery is at least once, as Confluent's: the group's offsets are the truth.

**Errors.** A record that cannot become a row (a key or field `pk.fields` names is missing, a value
that is neither a Struct nor an object) fails the task naming it; with `errors.tolerance=all` it goes
to the task's errant record reporter (KIP-610): logged and, with `errors.deadletterqueue.topic.name`,
dead-lettered, its position committed only after the dead letter was written. A lost connection (the
database restarting) is retried `connection.attempts` times, `connection.backoff.ms` apart; a retry
first checks whether the lost attempt committed after all (its acknowledgement lost with the
connection) and then writes nothing twice. A row the database refuses (a constraint violation) rolls
the flush back and fails the task (on restart it resumes from the offsets table); with
`errors.tolerance=all` the flush is written again row by row in savepoints, and each refused row is
reported as an errant record (dead-lettered before the transaction commits the positions past it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.errors import DataException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.api.sink import SinkConnector, SinkTask, sink_topics_errors
from eosconnect.connectors.jdbc import connection_errors
from eosconnect.connectors.jdbc_sink.config import CONFIG_DEF, cross_field_errors, parse_settings
from eosconnect.connectors.jdbc_sink.dialect import transactional_engine
from eosconnect.connectors.jdbc_sink.offsets_table import OffsetsTable
from eosconnect.connectors.jdbc_sink.rows import Row, RowMaker
from eosconnect.connectors.jdbc_sink.writer import RowWriter

__all__ = ["JdbcSinkConnector", "JdbcSinkTask"]

VERSION = "1.0.0"

log = logging.getLogger(__name__)


class JdbcSinkConnector(SinkConnector):
    """Writes records into database tables, exactly once by default (see the module doc)."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        def checks(props: Mapping[str, str]) -> dict[str, list[str]]:
            values = CONFIG_DEF.parse(props)
            errors = {**cross_field_errors(values), **sink_topics_errors(props)}
            return errors or connection_errors(values, new_sqlite_file_ok=True)  # shared with JdbcSource

        return CONFIG_DEF.validate_then(config, checks)

    def start(self, config: dict[str, str]) -> None:
        self.require_valid(config)
        self._config = dict(config)

    def task_class(self) -> type[SinkTask]:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config) for _ in range(max_tasks)]  # the consumer group spreads partitions

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int] | None) -> bool:
        """Exactly once, tasks resume from the offsets table: apply a reset or alteration there too."""
        settings = parse_settings(config)
        if not settings.exactly_once:
            return False
        engine = transactional_engine(settings.values)
        try:
            table = OffsetsTable(settings.offsets_table, config["name"])
            table.create(engine)
            if offsets is None:
                table.delete(engine)
            else:
                table.set(engine, offsets)
        finally:
            engine.dispose()
        return True


class JdbcSinkTask(SinkTask):
    """Buffers rows in `put`, writes them in `pre_commit` (one transaction per flush)."""

    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        self.settings = parse_settings(config)
        self.name = str(config.get("name", "jdbc-sink"))
        self.rows = RowMaker(self.settings)
        self.writer = RowWriter(self.settings, self.name)
        self.stores_offsets = self.settings.exactly_once
        #: With errors.tolerance=all: the records of buffered rows, to report rows the database refuses.
        self._records: dict[tuple[str, int, int], SinkRecord] | None = (
            {} if self.context.errant_record_reporter() is not None else None
        )
        self.written = 0
        #: The most records one `put` got: a smaller batch means the consumer had no more queued.
        self._full_batch = 0

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        positions = self.writer.claim(partitions)
        fenced_before = [tp for tp in partitions if tp in self.context.paused]
        if fenced_before:  # paused when a newer task fenced us; ours again now
            self.context.resume(*fenced_before)
        if positions:
            # With the leader epochs stored alongside, the runtime checks these positions against the
            # partitions' logs (KIP-320) before reading from them.
            self.context.offset(positions)
            log.info(
                "[%s] resuming from the database's offsets %s",
                self.name,
                {str(tp): om.offset for tp, om in sorted(positions.items())},
            )

    def put(self, records: list[SinkRecord]) -> None:
        """Rows into the buffer; a flush is asked for once `batch.size` rows wait, or when the
        consumer had no more records queued (this batch is smaller than the largest so far, or
        empty): caught up, the rows are written now rather than at the next `offset.flush.interval.ms`
        (Debezium's sink likewise writes each poll's records), so the last rows of a burst do not wait."""
        with self.writer.wall.phase("rows"):
            self._put(records)
        self._full_batch = max(self._full_batch, len(records))
        waiting = len(self.writer.buffer)
        if waiting >= self.settings.batch_size or (waiting and len(records) < self._full_batch):
            self.context.request_commit()

    def _put(self, records: list[SinkRecord]) -> None:
        row_of, add, kept = self.rows.row, self.writer.add, self._records  # bound once per batch
        for record in records:
            try:
                row = row_of(record)
            except DataException as exc:
                reporter = self.context.errant_record_reporter()
                if reporter is None:  # errors.tolerance=none: the task fails, naming the record
                    raise
                reporter.report(record, exc)  # KIP-610: logged / dead-lettered, its position committed
                continue
            if row is not None:
                add(row)
                if kept is not None:  # kept for a report at flush time (KIP-610)
                    kept[(record.original_topic, record.original_partition, record.offset)] = record

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        result = self.writer.flush(
            current_offsets, self._report_rejected if self._records is not None else None
        )
        if self._records is not None:
            flushed = {(tp.topic, tp.partition) for tp in current_offsets}
            self._records = {k: r for k, r in self._records.items() if (k[0], k[1]) not in flushed}
        self.written += result.rows
        for tp, generation in result.fenced.items():
            if tp in self.context.paused:
                continue  # said so already; the group takes it away soon
            log.warning(
                "[%s] %s was claimed by a newer task (generation %s in the offsets table): this task's "
                "unwritten rows of it are dropped (the new holder writes them) and it stops reading it",
                self.name,
                tp,
                generation,
            )
            self.context.pause(tp)
        return result.committed

    def _report_rejected(self, rejected: list[tuple[Row, Exception]]) -> None:
        """Rows the database refused (a constraint violation): reported as errant records (KIP-610),
        each dead letter written before the transaction commits the positions past them."""
        reporter = self.context.errant_record_reporter()
        assert reporter is not None and self._records is not None
        futures = []
        for row, exc in rejected:
            tp = row.topic_partition
            record = self._records[(tp.topic, tp.partition, row.offset)]
            futures.append(reporter.report(record, exc))
        for future in futures:
            future.result()

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self.writer.release(partitions)
        if self._records:
            gone = {(tp.topic, tp.partition) for tp in partitions}
            self._records = {k: r for k, r in self._records.items() if (k[0], k[1]) not in gone}

    def stop(self) -> None:
        writer = getattr(self, "writer", None)
        if writer is not None:
            log.info("[%s] wrote %d rows; task wall time %s", self.name, self.written, writer.wall.summary())
            writer.close()
