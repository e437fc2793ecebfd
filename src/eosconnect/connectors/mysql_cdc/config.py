"""`MySqlCdcSource` settings, under Debezium's names for what it implements."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance, Password
from eosconnect.api.validators import Range, Validator, ValidString
from eosconnect.connectors.debezium.filters import TableFilter
from eosconnect.connectors.mysql_cdc.types import (
    BigintUnsignedHandling,
    BinaryHandling,
    DecimalHandling,
    TimePrecision,
    TypeModes,
)

__all__ = ["CONFIG_DEF", "LockingMode", "MySqlCdcConfig", "SnapshotMode"]

MARIADB_CONNECTOR_CLASS = "io.debezium.connector.mariadb.MariaDbConnector"


class SnapshotMode(StrEnum):
    INITIAL = "initial"  # snapshot when there is no offset yet, then stream
    INITIAL_ONLY = "initial_only"  # snapshot, then produce nothing
    NO_DATA = "no_data"  # stream only, from the current end of the binlog
    NEVER = "never"
    WHEN_NEEDED = "when_needed"  # snapshot again when the stored position has been purged from the binlog


class LockingMode(StrEnum):
    MINIMAL = "minimal"  # a global read lock only while the snapshot's position is read
    EXTENDED = "extended"  # the global read lock for the whole snapshot
    NONE = "none"  # no lock: MariaDB's consistent snapshot names its own binlog position


def _regex_list_ok(value: Any) -> bool:
    try:
        for pattern in value:
            re.compile(pattern)
    except re.error:
        return False
    return True


_REGEXES = Validator.of(_regex_list_ok, "comma-separated regular expressions such as inventory\\.orders", [])


def _choices(kind: type[StrEnum]) -> Validator:
    return ValidString.in_(*(m.value for m in kind))


CONFIG_DEF = (
    ConfigDef()
    .define("database.hostname", ConfigType.STRING, importance=Importance.HIGH,
            documentation="MySQL or MariaDB server host.", group="Database")
    .define("database.port", ConfigType.INT, 3306, Importance.HIGH, "Server port.",
            Range.between(1, 65535), group="Database")
    .define("database.user", ConfigType.STRING, importance=Importance.HIGH,
            documentation="A user with REPLICATION SLAVE, REPLICATION CLIENT, RELOAD (the snapshot's lock) "
            "and SELECT on the captured tables.", group="Database")
    .define("database.password", ConfigType.PASSWORD, None, Importance.HIGH,
            "The user's password (never logged).", group="Database")
    .define("database.server.id", ConfigType.LONG, 184054, Importance.HIGH,
            "The replica server id the binlog reader registers with: unique among the server's replicas "
            "and other binlog readers.", Range.between(1, 2**32 - 1), group="Database")
    .define("topic.prefix", ConfigType.STRING, importance=Importance.HIGH,
            documentation="Logical server name: topics are <topic.prefix>.<database>.<table>, and it is "
            "source.name in every event.", group="Connector")
    .define("database.include.list", ConfigType.LIST, [], Importance.MEDIUM,
            "Regular expressions matched against database names: only matching databases are captured.",
            _REGEXES, group="Tables")
    .define("database.exclude.list", ConfigType.LIST, [], Importance.MEDIUM,
            "Regular expressions matched against database names: matching databases are not captured.",
            _REGEXES, group="Tables")
    .define("table.include.list", ConfigType.LIST, [], Importance.MEDIUM,
            "Regular expressions matched against <database>.<table>: only matching tables are captured "
            "(every table of the captured databases when empty).", _REGEXES, group="Tables")
    .define("table.exclude.list", ConfigType.LIST, [], Importance.MEDIUM,
            "Regular expressions matched against <database>.<table>: matching tables are not captured.",
            _REGEXES, group="Tables")
    .define("column.include.list", ConfigType.LIST, [], Importance.LOW,
            "Regular expressions matched against <database>.<table>.<column>: only matching columns are in "
            "the events' before/after (primary key columns always are).", _REGEXES, group="Tables")
    .define("column.exclude.list", ConfigType.LIST, [], Importance.LOW,
            "Regular expressions matched against <database>.<table>.<column>: matching columns are left "
            "out of before/after (primary key columns stay).", _REGEXES, group="Tables")
    .define("snapshot.mode", ConfigType.STRING, SnapshotMode.INITIAL.value, Importance.MEDIUM,
            "initial: copy the tables' rows (op=r) in one consistent-snapshot transaction on the first "
            "start, then stream from exactly its binlog position; initial_only: the snapshot only; "
            "no_data / never: stream from the end of the binlog; when_needed: as initial, and a new "
            "snapshot when the stored position was purged from the binlog.",
            _choices(SnapshotMode), group="Connector")
    .define("snapshot.locking.mode", ConfigType.STRING, LockingMode.MINIMAL.value, Importance.MEDIUM,
            "minimal: FLUSH TABLES WITH READ LOCK only while the snapshot transaction starts and reads its "
            "binlog position (milliseconds); extended: the lock for the whole snapshot; none: no lock "
            "(MariaDB's consistent snapshot names its own binlog position, exact without one; on MySQL "
            "the position may then be late by the transactions committing as the snapshot starts).",
            _choices(LockingMode), group="Connector")
    .define("snapshot.fetch.size", ConfigType.INT, 10240, Importance.LOW,
            "Rows read per snapshot batch.", Range.at_least(1), group="Connector")
    .define("gtid.source.includes", ConfigType.LIST, [], Importance.LOW,
            "Regular expressions matched against GTID sources (the server UUID on MySQL, the "
            "domain-server prefix on MariaDB): only the matching ones are kept in the offset's gtids.",
            _REGEXES, group="Connector")
    .define("gtid.source.excludes", ConfigType.LIST, [], Importance.LOW,
            "Regular expressions matched against GTID sources left out of the offset's gtids.", _REGEXES,
            group="Connector")
    .define("binary.handling.mode", ConfigType.STRING, BinaryHandling.BYTES.value, Importance.LOW,
            "BINARY/VARBINARY/BLOB columns as bytes, base64, base64-url-safe or hex.",
            _choices(BinaryHandling), group="Connector")
    .define("decimal.handling.mode", ConfigType.STRING, DecimalHandling.PRECISE.value, Importance.MEDIUM,
            "DECIMAL columns as precise (Decimal), double (FLOAT64) or string.",
            _choices(DecimalHandling), group="Connector")
    .define("time.precision.mode", ConfigType.STRING, TimePrecision.ADAPTIVE_TIME_MICROSECONDS.value,
            Importance.MEDIUM,
            "adaptive_time_microseconds (Debezium's io.debezium.time types by column precision, TIME as "
            "MicroTime), adaptive (TIME(0-3) as Time) or connect (Kafka's Date/Time/Timestamp).",
            _choices(TimePrecision), group="Connector")
    .define("bigint.unsigned.handling.mode", ConfigType.STRING, BigintUnsignedHandling.LONG.value,
            Importance.LOW,
            "BIGINT UNSIGNED as long (INT64: values past 2^63-1 wrap around, as in Debezium) or precise "
            "(Decimal with scale 0).", _choices(BigintUnsignedHandling), group="Connector")
    .define("include.schema.changes", ConfigType.BOOLEAN, True, Importance.LOW,
            "Debezium writes schema change events to <topic.prefix>; MySqlCdcSource does not yet (it logs "
            "so once when true). Row events always follow DDL through the binlog's table maps.",
            group="Connector")
    .define("heartbeat.interval.ms", ConfigType.INT, 0, Importance.MEDIUM,
            "Every this many ms without change events, write a heartbeat record to "
            "<heartbeat.topics.prefix>.<topic.prefix> whose offset is the binlog position read so far, so "
            "the stored offset moves on while the captured tables are idle and other tables change "
            "(a restart then does not read those transactions again; 0: off).", Range.at_least(0),
            group="Connector")
    .define("heartbeat.topics.prefix", ConfigType.STRING, "__debezium-heartbeat", Importance.LOW,
            "Prefix of the heartbeat topic.", group="Connector")
    .define("tombstones.on.delete", ConfigType.BOOLEAN, True, Importance.MEDIUM,
            "Follow each delete event with a tombstone (null value) for log compaction.", group="Connector")
    .define("extended.headers.enabled", ConfigType.BOOLEAN, True, Importance.LOW,
            "Add Debezium's context headers to every change event: __debezium.context.connectorLogicalName "
            "(topic.prefix), .taskId, .connectorName (mysql or mariadb) and .runId (one per task run).",
            group="Connector")
    .define("max.batch.size", ConfigType.INT, 2048, Importance.LOW,
            "Most change events returned by one poll.", Range.at_least(1), group="Connector")
    .define("errors.max.retries", ConfigType.INT, -1, Importance.LOW,
            "How many times a streaming task tries its binlog connection again after losing it (the "
            "server restarted) before the task fails: -1 (the default) without limit, 0 fails at once. "
            "The stream resumes after the last whole transaction read.", Range.at_least(-1),
            group="Connector")
    .define("retriable.restart.connector.wait.ms", ConfigType.INT, 10000, Importance.LOW,
            "Wait between tries of a lost binlog connection (the first is at once).", Range.at_least(0),
            group="Connector")
    .define("poll.interval.ms", ConfigType.INT, 500, Importance.LOW,
            "Longest wait for binlog events in one poll when there is nothing to return.",
            Range.at_least(1), group="Connector")
)  # fmt: skip


@dataclass(frozen=True)
class MySqlCdcConfig:
    """The parsed settings; the filters are compiled once (the binlog reader asks per rows event)."""

    values: Mapping[str, Any]
    connector_class: str = ""

    @classmethod
    def parse(cls, config: Mapping[str, str]) -> MySqlCdcConfig:
        return cls(CONFIG_DEF.parse(config), config.get("connector.class", ""))

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def connector(self) -> str:
        """Debezium's connector name (source.connector): mariadb under its MariaDB class name."""
        return "mariadb" if self.connector_class == MARIADB_CONNECTOR_CLASS else "mysql"

    @cached_property
    def databases(self) -> TableFilter:
        return _filter(self.values["database.include.list"], self.values["database.exclude.list"])

    @cached_property
    def tables(self) -> TableFilter:
        return _filter(self.values["table.include.list"], self.values["table.exclude.list"])

    @cached_property
    def columns(self) -> TableFilter:
        return _filter(self.values["column.include.list"], self.values["column.exclude.list"])

    @cached_property
    def gtid_sources(self) -> TableFilter:
        return _filter(self.values["gtid.source.includes"], self.values["gtid.source.excludes"])

    def captured(self, db: str, table: str) -> bool:
        return self.databases(db) and self.tables(db, table)

    @property
    def modes(self) -> TypeModes:
        return TypeModes(
            DecimalHandling(self.values["decimal.handling.mode"]),
            TimePrecision(self.values["time.precision.mode"]),
            BinaryHandling(self.values["binary.handling.mode"]),
            BigintUnsignedHandling(self.values["bigint.unsigned.handling.mode"]),
        )

    def connection(self) -> dict[str, Any]:
        """PyMySQL's connection settings (mysql-replication takes the same)."""
        password = self.values.get("database.password")
        return {
            "host": self.values["database.hostname"],
            "port": self.values["database.port"],
            "user": self.values["database.user"],
            "password": password.value if isinstance(password, Password) and password.value else "",
            "connect_timeout": 10,  # a silent port fails validation in seconds, not minutes
            "charset": "utf8mb4",
        }

    def describe(self) -> str:
        return f"mysql://{self.values['database.user']}@{self.values['database.hostname']}:{self.values['database.port']}"


def _filter(include: list[str], exclude: list[str]) -> TableFilter:
    return TableFilter(
        tuple(re.compile(p.strip()) for p in include if p.strip()),
        tuple(re.compile(p.strip()) for p in exclude if p.strip()),
    )
