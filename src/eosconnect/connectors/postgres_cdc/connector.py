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
from typing import Any

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
from eosconnect.connectors.postgres_cdc.replication import drop_slot, retained_wal
from eosconnect.connectors.postgres_cdc.signal_channels import send_signal
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

    def retired(self, config: dict[str, str], deleted: bool) -> None:
        """The slot outlives the connector: dropped with slot.drop.on.stop=true, else a deletion says
        what it keeps (WAL piles up on the server until the slot is read or dropped). Not in stop(),
        which a restart or rebalance calls too: the slot is what the next task resumes from."""
        cfg = CdcConfig.parse(config)
        if not (cfg["slot.drop.on.stop"] or deleted):
            return  # a stopped connector resumes on its slot
        what = f"PostgresCdcSource {config.get('name', '?')} {'deleted' if deleted else 'stopped'}"
        try:
            said = _retire_slot(cfg)
        except Exception as exc:
            log.warning(
                "%s: could not look at its replication slot %r on %s (%s); it may still retain WAL. If no "
                "connector will read it again, drop it: %s",
                what, cfg["slot.name"], cfg.describe(), exc, _drop_statement(cfg),
            )  # fmt: skip
            return
        if said:
            log.warning("%s: %s", what, said)

    def signal(self, config: Mapping[str, str], signal_type: str, data: Mapping[str, Any] | None) -> str:
        """A signal into the signal table (read back from the stream by the task), or the Kafka
        signal topic when the connector has no signal table."""
        return send_signal(CdcConfig.parse(config), signal_type, data)

    def task_class(self) -> type[SourceTask]:
        return PostgresCdcTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config)]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


def _retire_slot(cfg: CdcConfig) -> str | None:
    """Drop the slot (slot.drop.on.stop=true) or say what it keeps; None when there is no slot."""
    slot = cfg["slot.name"]
    with catalog.connect(cfg) as conn:
        retained = retained_wal(conn, slot)
        if retained is None:
            return None
        if cfg["slot.drop.on.stop"]:
            drop_slot(conn, slot, doing="as slot.drop.on.stop=true asks")
            return (
                f"dropped its replication slot {slot!r} on {cfg.describe()} (slot.drop.on.stop=true), with "
                f"the {retained} of WAL it retained"
            )
    return (
        f"its replication slot {slot!r} on {cfg.describe()} stays and retains {retained} of WAL, more as the "
        "database changes (PostgreSQL keeps it until the slot is read or dropped). If no connector will "
        f"read the slot again, drop it: {_drop_statement(cfg)} (slot.drop.on.stop=true drops it when the "
        "connector is deleted or stopped)"
    )


def _drop_statement(cfg: CdcConfig) -> str:
    return f"SELECT pg_drop_replication_slot('{cfg['slot.name']}');"
