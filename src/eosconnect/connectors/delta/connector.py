"""`DeltaSink`: Kafka records into a Delta Lake table (delta-rs), exactly once.

Each record becomes a row (`delta.mode=append`) or an upsert or delete by `delta.merge.keys`
(`delta.mode=merge`: Debezium envelopes, flattened records with `__op`/`__deleted`, tombstones; see
`lake.changes`). Values are Structs (any converter with schemas; types per `lake.arrow_schema`) or
schemaless JSON maps. A missing table is created on the first commit (partitioned by
`delta.partition.by`); a record with a new field adds the column (schema evolution; a field whose
type changed is refused, naming it).

**Exactly once.** Rows wait per partition until `flush.size` rows wait or `commit.interval.ms`
passed; then one Delta commit carries the rows and, per partition, `txn` actions with the next
offset, the leader epoch and the writer's generation (see `table`). A task assigned a partition
claims it (raising the generation) and resumes from the table's offset, not the consumer group's
(which gets the positions after each commit, as information). A crash before the commit loses the
rows and the positions together; after it keeps both.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import TopicPartition
from eosconnect.api.sink import SinkConnector, SinkTask, sink_topics_errors
from eosconnect.connectors.delta.config import CONFIG_DEF, DeltaMode, cross_field_errors, parse_settings
from eosconnect.connectors.delta.table import DeltaLakeTable
from eosconnect.connectors.lake.arrow_schema import Mapper
from eosconnect.connectors.lake.changes import ChangeMaker
from eosconnect.connectors.lake.task import LakeSinkTask, LakeTable

__all__ = ["DeltaSinkConnector", "DeltaSinkTask"]

VERSION = "1.0.0"


class DeltaSinkConnector(SinkConnector):
    """Writes records into one Delta table, exactly once (see the module doc)."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        def checks(props: Mapping[str, str]) -> dict[str, list[str]]:
            return {**cross_field_errors(CONFIG_DEF.parse(props)), **sink_topics_errors(props)}

        return CONFIG_DEF.validate_then(config, checks)

    def start(self, config: dict[str, str]) -> None:
        self.require_valid(config)
        self._config = dict(config)

    def task_class(self) -> type[SinkTask]:
        return DeltaSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config) for _ in range(max_tasks)]

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int] | None) -> bool:
        """Tasks resume from the table's `txn` actions: an offset change would have to be a table
        commit, which this sink does not make for a stopped connector; refused with the way out."""
        raise ConfigException(
            "DeltaSink keeps its positions in the Delta table's txn actions; to start over, write into a "
            "new delta.table.path (or rename the connector: its txn app ids start with its name)"
        )


class DeltaSinkTask(LakeSinkTask):
    """Rows into the Delta table, with the positions in the same commit."""

    def version(self) -> str:
        return VERSION

    def make_table(self, config: Mapping[str, str], connector: str) -> LakeTable:
        return DeltaLakeTable(parse_settings(config), connector)

    def make_changes(self, config: Mapping[str, str]) -> ChangeMaker:
        settings = parse_settings(config)
        # Delta has no time-of-day type: such values go as ISO-8601 text
        return ChangeMaker(
            Mapper(time_type=pa.string()),
            merge=settings.mode is DeltaMode.MERGE,
            keys=settings.merge_keys,
        )
