"""`PostgresCdcSource` (also `io.debezium.connector.postgresql.PostgresConnector`): change data
capture from PostgreSQL's write-ahead log through logical replication with the built-in `pgoutput`
plugin, in Debezium's event format, so Debezium consumers read its topics unchanged.

Rows of the captured tables go to `<topic.prefix>.<schema>.<table>`: an initial snapshot (op `r`,
read in the replication slot's exported snapshot), then every insert (`c`), update (`u`) and delete
(`d`, followed by a tombstone) in commit order. Keys are the primary key structs; values the
Debezium envelope (before, after, source, op, ts_ms). Source offsets are the commit LSN and the
event's position in its transaction, and the slot's confirmed position moves only once the Kafka
transaction holding the events committed: exactly once with `exactly.once.source.support=enabled`,
and with `transaction.boundary=connector` each database transaction is one Kafka transaction.
One task (a slot has one reader). Needs `wal_level=logical` and a role with REPLICATION. Set-up,
event format, WAL retention and migrating a Debezium config: [cdc.md](cdc.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.errors import ConfigException
from eosconnect.api.source import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
)
from eosconnect.connectors.postgres_cdc import catalog
from eosconnect.connectors.postgres_cdc.config import CONFIG_DEF, CdcConfig
from eosconnect.connectors.postgres_cdc.task import VERSION, PostgresCdcTask

__all__ = ["PostgresCdcSourceConnector"]

log = logging.getLogger(__name__)


class PostgresCdcSourceConnector(SourceConnector):
    """One task reads the slot (a replication slot has a single reader, as in Debezium)."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        return CONFIG_DEF.validate_then(config, lambda props: catalog.check(CdcConfig.parse(props)))

    def start(self, config: dict[str, str]) -> None:
        cfg = CdcConfig.parse(config)
        errors = catalog.check(cfg)
        if errors:
            raise ConfigException(errors=errors)
        self._config = dict(config)
        log.info("PostgresCdcSource: %s, slot %s", cfg.describe(), cfg["slot.name"])

    def task_class(self) -> type[SourceTask]:
        return PostgresCdcTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config)]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED
