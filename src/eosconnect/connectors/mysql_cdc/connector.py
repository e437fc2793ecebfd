"""`MySqlCdcSource` (also `io.debezium.connector.mysql.MySqlConnector` and
`io.debezium.connector.mariadb.MariaDbConnector`): change data capture from a MySQL or MariaDB
binlog, read through mysql-replication, in Debezium's event format, so Debezium consumers read
its topics unchanged.

Rows of the captured tables go to `<topic.prefix>.<database>.<table>`: an initial snapshot (op `r`,
read in one consistent-snapshot transaction), then every insert (`c`), update (`u`) and delete
(`d`, followed by a tombstone) in binlog order, each decoded with its table map's columns (the
table as it was when the row was written). Exactly once with `exactly.once.source.support=enabled`;
with `transaction.boundary=connector` each database transaction is one Kafka transaction. One task
(the binlog is one stream). Server settings and migration from Debezium: docs/mysql-cdc.md.
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
from eosconnect.connectors.mysql_cdc import catalog
from eosconnect.connectors.mysql_cdc.config import CONFIG_DEF, MySqlCdcConfig
from eosconnect.connectors.mysql_cdc.task import VERSION, MySqlCdcTask

__all__ = ["MySqlCdcSourceConnector"]

log = logging.getLogger(__name__)


class MySqlCdcSourceConnector(SourceConnector):
    """One task reads the binlog, as in Debezium."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        return CONFIG_DEF.validate_then(config, lambda props: catalog.check(MySqlCdcConfig.parse(props)))

    def start(self, config: dict[str, str]) -> None:
        cfg = MySqlCdcConfig.parse(config)
        errors = catalog.check(cfg)
        if errors:
            raise ConfigException(errors=errors)
        self._config = dict(config)
        log.info("MySqlCdcSource: %s, server id %s", cfg.describe(), cfg["database.server.id"])

    def task_class(self) -> type[SourceTask]:
        return MySqlCdcTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config)]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED
