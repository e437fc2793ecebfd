"""`JdbcSink` (also `io.confluent.connect.jdbc.JdbcSinkConnector`): Kafka records into database tables.

Settings and behaviour follow Confluent's JDBC sink (insert.mode, pk.mode, auto.create, ...; see
`config`), with SQLAlchemy URLs. The difference is delivery: with `exactly.once=true` (the default)
every flush writes the rows *and* the consumed positions into the target database in one
transaction, and a task resumes from the positions it finds there (see `offsets_table`), so a crash
at any point neither loses nor repeats a row, in every insert.mode, with or without primary keys.
The consumer group's offsets are still committed after each flush, as information (lag
monitoring), as KIP-656 does for Kafka targets. With `exactly.once=false` delivery is at least
once, as Confluent's: make writes idempotent with upserts on a key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.api.sink import SinkConnector, SinkTask, sink_topics_errors
from eosconnect.connectors.jdbc_sink.config import CONFIG_DEF, cross_field_errors, parse_settings
from eosconnect.connectors.jdbc_sink.dialect import transactional_engine
from eosconnect.connectors.jdbc_sink.offsets_table import OffsetsTable
from eosconnect.connectors.jdbc_sink.rows import RowMaker
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
        results = CONFIG_DEF.validate(config)
        if any(r.errors for r in results):
            return results
        errors = {**cross_field_errors(CONFIG_DEF.parse(config)), **sink_topics_errors(config)}
        return [
            ConfigValue(
                r.name, r.value, r.recommended_values, [*r.errors, *errors.get(r.name, [])], r.visible
            )
            for r in results
        ]

    def start(self, config: dict[str, str]) -> None:
        errors = {v.name: v.errors for v in self.validate(config) if v.errors}
        if errors:
            raise ConfigException(errors=errors)
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
        self.written = 0

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        positions = self.writer.claim(partitions)
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
        for record in records:
            try:
                row = self.rows.row(record)
            except DataException as exc:
                reporter = self.context.errant_record_reporter()
                if reporter is None:  # errors.tolerance=none: the task fails, naming the record
                    raise
                reporter.report(record, exc)  # KIP-610: logged / dead-lettered, its position committed
                continue
            if row is not None:
                self.writer.add(row)
        if len(self.writer.buffer) >= self.settings.batch_size:
            self.context.request_commit()

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        result = self.writer.flush(current_offsets)
        self.written += result.rows
        for tp, generation in result.fenced.items():
            log.warning(
                "[%s] %s was claimed by a newer task (generation %s in the offsets table): this task's "
                "unwritten rows of it are dropped (the new holder writes them) and it stops reading it",
                self.name,
                tp,
                generation,
            )
            self.context.pause(tp)
        return result.committed

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        self.writer.release(partitions)

    def stop(self) -> None:
        writer = getattr(self, "writer", None)
        if writer is not None:
            writer.close()
