"""`IcebergSink` (also `org.apache.iceberg.connect.IcebergSinkConnector`): Kafka records into Iceberg
tables through PyIceberg, exactly once.

Settings are Iceberg's Kafka Connect sink's where they apply (see `config`): the tables in
`iceberg.tables` (`namespace.table`), the catalog in `iceberg.catalog.*` as PyIceberg names its
properties (`iceberg.catalog.type=sql` with `iceberg.catalog.uri=sqlite:////path/catalog.db` or a
PostgreSQL URL and `iceberg.catalog.warehouse=file:///path/warehouse` or an object-store URI;
`iceberg.catalog.type=rest` with `iceberg.catalog.uri`). Records are Structs (any converter with
schemas; types per `lake.arrow_schema`) or schemaless JSON maps; each becomes a row, or with
`iceberg.tables.upsert-mode-enabled` an upsert or delete by `iceberg.tables.default-id-columns`
(`lake.changes`; PyIceberg rewrites the matched data files, copy-on-write).

**Exactly once.** Unlike Iceberg's own sink (a coordinator commits for all tasks every five
minutes, through a control topic), each task commits its own partitions every `commit.interval.ms`
(or `iceberg.control.commit.interval-ms`; default a few seconds): one snapshot per table with the
rows and, in its summary, the partitions' positions and generations (see `table`). A task assigned
a partition claims it (a snapshot raising the generation) and resumes from the table's positions,
not the consumer group's (which gets them after each commit, as information). A crash before the
commit loses rows and positions together; after it keeps both; a zombie's commit after a newer
claim fails on the catalog's compare-and-swap and, retried, finds itself fenced.
"""

from __future__ import annotations

from collections.abc import Mapping

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import TopicPartition
from eosconnect.api.sink import SinkConnector, SinkTask, sink_topics_errors
from eosconnect.connectors.iceberg.config import CONFIG_DEF, cross_field_errors, lake_config, parse_settings
from eosconnect.connectors.iceberg.table import IcebergTables
from eosconnect.connectors.lake.arrow_schema import Mapper
from eosconnect.connectors.lake.changes import ChangeMaker
from eosconnect.connectors.lake.task import LakeSinkTask, LakeTable

__all__ = ["IcebergSinkConnector", "IcebergSinkTask"]

VERSION = "1.0.0"


class IcebergSinkConnector(SinkConnector):
    """Writes records into Iceberg tables, exactly once (see the module doc)."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        def checks(props: Mapping[str, str]) -> dict[str, list[str]]:
            return {**cross_field_errors(CONFIG_DEF.parse(props), config), **sink_topics_errors(props)}

        return CONFIG_DEF.validate_then(config, checks)

    def start(self, config: dict[str, str]) -> None:
        self.require_valid(config)
        self._config = dict(config)

    def task_class(self) -> type[SinkTask]:
        return IcebergSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config) for _ in range(max_tasks)]

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int] | None) -> bool:
        """Tasks resume from the snapshot summary: refused, with the way out."""
        raise ConfigException(
            "IcebergSink keeps its positions in the tables' snapshot summaries; to start over, rename the "
            "connector (the summary property is eosconnect.positions.<connector>)"
        )


class IcebergSinkTask(LakeSinkTask):
    """Rows into the Iceberg tables, with the positions in the same snapshot."""

    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        super().start(lake_config(config))

    def make_table(self, config: Mapping[str, str], connector: str) -> LakeTable:
        return IcebergTables(parse_settings(config), connector)

    def make_changes(self, config: Mapping[str, str]) -> ChangeMaker:
        settings = parse_settings(config)
        return ChangeMaker(
            Mapper(), merge=settings.upsert, keys=settings.id_columns, cdc_field=settings.cdc_field
        )
