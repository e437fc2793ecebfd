"""`PostgresCdcSource` settings, under Debezium's names for what it implements."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance, Password
from eosconnect.api.validators import Range, Validator, ValidString
from eosconnect.connectors.debezium.filters import TableFilter
from eosconnect.connectors.debezium.modes import DecimalHandling, TimePrecision
from eosconnect.connectors.postgres_cdc.events import UNAVAILABLE
from eosconnect.connectors.postgres_cdc.types import IntervalHandling

__all__ = ["CONFIG_DEF", "AutoCreate", "CdcConfig", "SnapshotMode", "TableFilter", "parse_key_columns"]


class AutoCreate(StrEnum):
    ALL_TABLES = "all_tables"
    FILTERED = "filtered"
    DISABLED = "disabled"


class SnapshotMode(StrEnum):
    INITIAL = "initial"  # snapshot when there is no offset yet, then stream
    NO_DATA = "no_data"  # stream only (Debezium's former `never`)
    NEVER = "never"
    INITIAL_ONLY = "initial_only"  # snapshot, then stop producing


def _regex_list_ok(value: Any) -> bool:
    try:
        for pattern in value:
            re.compile(pattern)
    except re.error:
        return False
    return True


def parse_key_columns(value: str) -> dict[str, tuple[str, ...]]:
    """message.key.columns: `<schema>.<table>:<col>,<col>;...` -> {"<schema>.<table>": (cols)}."""
    out: dict[str, tuple[str, ...]] = {}
    for part in (value or "").split(";"):
        if not part.strip():
            continue
        table, _, columns = part.partition(":")
        names = tuple(c.strip() for c in columns.split(",") if c.strip())
        if not table.strip() or not names:
            raise ValueError(part)
        out[table.strip()] = names
    return out


def _key_columns_ok(value: Any) -> bool:
    try:
        parse_key_columns(str(value or ""))
    except ValueError:
        return False
    return True


_REGEXES = Validator.of(_regex_list_ok, "comma-separated regular expressions such as public\\.orders", [])

CONFIG_DEF = (
    ConfigDef()
    .define("database.hostname", ConfigType.STRING, importance=Importance.HIGH,
            documentation="PostgreSQL server host.", group="Database")
    .define("database.port", ConfigType.INT, 5432, Importance.HIGH, "PostgreSQL server port.",
            Range.between(1, 65535), group="Database")
    .define("database.user", ConfigType.STRING, importance=Importance.HIGH,
            documentation="A role with the REPLICATION attribute (and SELECT on the captured tables).",
            group="Database")
    .define("database.password", ConfigType.PASSWORD, None, Importance.HIGH,
            "The role's password (never logged).", group="Database")
    .define("database.dbname", ConfigType.STRING, importance=Importance.HIGH,
            documentation="The database to capture.", group="Database")
    .define("topic.prefix", ConfigType.STRING, importance=Importance.HIGH,
            documentation="Logical server name: topics are <topic.prefix>.<schema>.<table>, and it is "
            "source.name in every event.", group="Connector")
    .define("slot.name", ConfigType.STRING, "debezium", Importance.MEDIUM,
            "Logical replication slot (pgoutput) the connector reads; created if missing. It keeps "
            "the WAL the connector has not confirmed yet.", group="Replication")
    .define("slot.drop.on.stop", ConfigType.BOOLEAN, False, Importance.LOW,
            "Drop the replication slot when the connector is deleted or stopped (STOPPED), once its "
            "task has ended; never on a task restart, a reconfiguration or a rebalance. For test and "
            "development set-ups (as in Debezium): the slot's changes go with it, so a connector that "
            "resumes from its offsets fails (reset them to take a new snapshot). false: deleting the "
            "connector leaves the slot and logs a WARNING with the WAL it retains and how to drop it.",
            group="Replication")
    .define("plugin.name", ConfigType.STRING, "pgoutput", Importance.LOW,
            "Logical decoding plugin: pgoutput, the only one supported (Debezium's default).",
            ValidString.in_("pgoutput"), group="Replication")
    .define("publication.name", ConfigType.STRING, "dbz_publication", Importance.MEDIUM,
            "Publication whose tables pgoutput streams.", group="Replication")
    .define("publication.autocreate.mode", ConfigType.STRING, AutoCreate.ALL_TABLES.value, Importance.MEDIUM,
            "all_tables: create the publication FOR ALL TABLES if missing (needs a superuser); filtered: "
            "create it (or set its tables) for the tables table.include.list/table.exclude.list select "
            "(needs CREATE on the database and ownership of the tables); disabled: it must exist.",
            ValidString.in_(*(m.value for m in AutoCreate)), group="Replication")
    .define("table.include.list", ConfigType.LIST, [], Importance.MEDIUM,
            "Regular expressions matched against <schema>.<table>: only matching tables are captured "
            "(all non-system tables when empty).", _REGEXES, group="Tables")
    .define("table.exclude.list", ConfigType.LIST, [], Importance.MEDIUM,
            "Regular expressions matched against <schema>.<table>: matching tables are not captured "
            "(not with table.include.list).", _REGEXES, group="Tables")
    .define("column.include.list", ConfigType.LIST, [], Importance.LOW,
            "Regular expressions matched against <schema>.<table>.<column>: only matching columns are in "
            "the events' before/after (primary key columns always are).", _REGEXES, group="Tables")
    .define("column.exclude.list", ConfigType.LIST, [], Importance.LOW,
            "Regular expressions matched against <schema>.<table>.<column>: matching columns are left out "
            "of before/after (not with column.include.list; primary key columns stay).", _REGEXES,
            group="Tables")
    .define("snapshot.mode", ConfigType.STRING, SnapshotMode.INITIAL.value, Importance.MEDIUM,
            "initial: copy the tables' rows (op=r) from the slot's exported snapshot on the first start, "
            "then stream from exactly there; no_data / never: stream changes only; initial_only: snapshot "
            "and produce nothing after it.",
            ValidString.in_(*(m.value for m in SnapshotMode)), group="Connector")
    .define("snapshot.fetch.size", ConfigType.INT, 10240, Importance.LOW,
            "Rows read per snapshot batch.", Range.at_least(1), group="Connector")
    .define("heartbeat.interval.ms", ConfigType.INT, 0, Importance.MEDIUM,
            "Every this many ms without changes, write a heartbeat record to "
            "<heartbeat.topics.prefix>.<topic.prefix> whose offset carries the server's WAL position, so "
            "the slot advances on idle or filtered databases (0: off).", Range.at_least(0), group="Connector")
    .define("heartbeat.topics.prefix", ConfigType.STRING, "__debezium-heartbeat", Importance.LOW,
            "Prefix of the heartbeat topic.", group="Connector")
    .define("tombstones.on.delete", ConfigType.BOOLEAN, True, Importance.MEDIUM,
            "Follow each delete event with a tombstone (null value) for log compaction.", group="Connector")
    .define("extended.headers.enabled", ConfigType.BOOLEAN, True, Importance.LOW,
            "Add Debezium's context headers to every change event: __debezium.context.connectorLogicalName "
            "(topic.prefix), .taskId, .connectorName (postgresql) and .runId (one per task run).",
            group="Connector")
    .define("decimal.handling.mode", ConfigType.STRING, DecimalHandling.PRECISE.value, Importance.MEDIUM,
            "numeric columns as precise (Decimal), double (FLOAT64) or string.",
            ValidString.in_(*(m.value for m in DecimalHandling)), group="Connector")
    .define("time.precision.mode", ConfigType.STRING, TimePrecision.ADAPTIVE.value, Importance.MEDIUM,
            "adaptive (Debezium's io.debezium.time types by column precision), "
            "adaptive_time_microseconds, or connect (Kafka's Date/Time/Timestamp).",
            ValidString.in_(*(m.value for m in TimePrecision)), group="Connector")
    .define("interval.handling.mode", ConfigType.STRING, IntervalHandling.NUMERIC.value, Importance.LOW,
            "interval columns as numeric (io.debezium.time.MicroDuration: microseconds, a month counted as "
            "30.4375 days, so '1 mon' comes back as '30 days 10:30:00') or string "
            "(io.debezium.time.Interval: ISO-8601 P1Y2M3DT4H5M6.78S, every component kept).",
            ValidString.in_(*(m.value for m in IntervalHandling)), group="Connector")
    .define("unavailable.value.placeholder", ConfigType.STRING, UNAVAILABLE, Importance.LOW,
            "What stands for an unchanged TOASTed value the WAL does not carry (REPLICA IDENTITY DEFAULT): "
            "in text columns as it is, in bytea columns as its bytes. With REPLICA IDENTITY FULL the value "
            "is taken from the old row instead. JdbcSink leaves a column holding it untouched.",
            group="Connector")
    .define("max.batch.size", ConfigType.INT, 2048, Importance.LOW,
            "Most change events returned by one poll.", Range.at_least(1), group="Connector")
    .define("poll.interval.ms", ConfigType.INT, 500, Importance.LOW,
            "Longest wait for WAL in one poll when there is nothing to return.", Range.at_least(1),
            group="Connector")
    .define("database.transactions.per.kafka.transaction", ConfigType.INT, 1, Importance.LOW,
            "With transaction.boundary=connector: how many whole database transactions one Kafka "
            "transaction may hold. 1 (the default): each database transaction is exactly one Kafka "
            "transaction, one commit each, which bounds a workload of small transactions by the commit "
            "rate; more: the database transactions a poll returns are committed together, up to this "
            "many, each still whole (never split, and no waiting for more).", Range.at_least(1),
            group="Connector")
    .define("errors.max.retries", ConfigType.INT, -1, Importance.LOW,
            "How many times a streaming task tries its replication connection again after losing it "
            "(PostgreSQL restarted or failed over) before the task fails: -1 (the default) without limit, "
            "0 fails at once. Records read before the loss are kept; the stream resumes after them.",
            Range.at_least(-1), group="Connector")
    .define("signal.data.collection", ConfigType.STRING, None, Importance.MEDIUM,
            "The signal table, <schema>.<table> with columns (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) "
            "NOT NULL, data VARCHAR(2048)), in the publication: rows inserted into it are signals "
            "(execute-snapshot, stop-snapshot, pause-snapshot, resume-snapshot, log), read from the "
            "stream; incremental snapshots write their watermarks to it. Its own changes are not emitted.",
            group="Signals")
    .define("signal.enabled.channels", ConfigType.LIST, ["source"], Importance.LOW,
            "Where signals come from: source (the signal table) and/or kafka (signal.kafka.topic).",
            Validator.of(lambda v: all(c.strip() in ("source", "kafka") for c in v),
                         "a list of source and/or kafka", []), group="Signals")
    .define("signal.kafka.topic", ConfigType.STRING, None, Importance.LOW,
            "The Kafka signal topic (with signal.enabled.channels=source,kafka): records keyed by "
            "topic.prefix whose value is {\"type\": ..., \"data\": {...}}.", group="Signals")
    .define("signal.kafka.bootstrap.servers", ConfigType.STRING, None, Importance.LOW,
            "Brokers of the signal topic (default: the worker's bootstrap.servers).", group="Signals")
    .define("signal.kafka.groupId", ConfigType.STRING, "kafka-signal", Importance.LOW,
            "Consumer group reading the signal topic (its committed offset says which signals were "
            "acted on).", group="Signals")
    .define("incremental.snapshot.chunk.size", ConfigType.INT, 1024, Importance.MEDIUM,
            "Rows an incremental snapshot reads per chunk (between one pair of watermarks; one Kafka "
            "transaction each).", Range.at_least(1), group="Signals")
    .define("read.only", ConfigType.BOOLEAN, False, Importance.LOW,
            "Debezium's read-only incremental snapshots (watermarks from pg_current_snapshot(), no writes "
            "to the signal table): not supported; true is refused at validation.", group="Signals")
    .define("snapshot.new.tables", ConfigType.STRING, "off", Importance.MEDIUM,
            "incremental: a table that table.include.list starts to match (after a configuration change) "
            "gets its existing rows by an incremental snapshot, without a signal; off: only its changes "
            "from then on (send an execute-snapshot signal for its rows). The log says which, per table.",
            ValidString.in_("off", "incremental"), group="Signals")
    .define("message.key.columns", ConfigType.STRING, "", Importance.LOW,
            "Key columns of tables without a primary key, <schema>.<table>:<column>[,<column>...] "
            "separated by semicolons: the events' key, and the order an incremental snapshot reads in.",
            Validator.of(lambda v: _key_columns_ok(v), "<schema>.<table>:<col>,<col>;...", ""),
            group="Tables")
    .define("retriable.restart.connector.wait.ms", ConfigType.INT, 10000, Importance.LOW,
            "Wait between tries of a lost replication connection (the first is at once).",
            Range.at_least(0), group="Connector")
)  # fmt: skip


@dataclass(frozen=True)
class CdcConfig:
    """The parsed settings."""

    values: Mapping[str, Any]

    @classmethod
    def parse(cls, config: Mapping[str, str]) -> CdcConfig:
        return cls(CONFIG_DEF.parse(config))

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def tables(self) -> TableFilter:
        return TableFilter(
            tuple(re.compile(p.strip()) for p in self.values["table.include.list"] if p.strip()),
            tuple(re.compile(p.strip()) for p in self.values["table.exclude.list"] if p.strip()),
        )

    @property
    def key_columns(self) -> dict[str, tuple[str, ...]]:
        return parse_key_columns(self.values["message.key.columns"])

    @property
    def signal_table(self) -> tuple[str, str] | None:
        name = self.values["signal.data.collection"]
        if not name:
            return None
        parts = [p.strip().strip('"') for p in str(name).split(".")]
        return (parts[-2], parts[-1]) if len(parts) >= 2 else ("public", parts[0])

    @property
    def signal_channels(self) -> tuple[str, ...]:
        return tuple(c.strip() for c in self.values["signal.enabled.channels"] if c.strip())

    def signal_problems(self) -> dict[str, list[str]]:
        """What the signal settings lack (checked with the database's own problems)."""
        errors: dict[str, list[str]] = {}
        if "kafka" in self.signal_channels:
            for name in ("signal.kafka.topic", "signal.kafka.bootstrap.servers"):
                if not self.values[name]:
                    errors[name] = [f"signal.enabled.channels has kafka: set {name} for the signal topic"]
        if self.values["read.only"]:
            errors["read.only"] = [
                "read-only incremental snapshots are not supported: set read.only=false and give the "
                "role INSERT on the signal table (signal.data.collection), which holds the watermarks"
            ]
        if self.values["snapshot.new.tables"] == "incremental" and self.signal_table is None:
            errors["signal.data.collection"] = [
                "snapshot.new.tables=incremental writes the snapshot's watermarks to the signal table: "
                "set signal.data.collection to <schema>.<table>"
            ]
        return errors

    @property
    def columns(self) -> TableFilter:
        return TableFilter(
            tuple(re.compile(p.strip()) for p in self.values["column.include.list"] if p.strip()),
            tuple(re.compile(p.strip()) for p in self.values["column.exclude.list"] if p.strip()),
        )

    def dsn(self, *, replication: bool = False) -> str:
        """A libpq connection string; the session settings make value texts unambiguous."""
        password = self.values.get("database.password")
        parts = {
            "host": self.values["database.hostname"],
            "port": str(self.values["database.port"]),
            "user": self.values["database.user"],
            "dbname": self.values["database.dbname"],
            "application_name": "eosconnect-postgres-cdc",
            "connect_timeout": "10",  # a silent port fails validation in seconds, not minutes
            "options": "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres -c bytea_output=hex "
            "-c extra_float_digits=3",
        }
        if isinstance(password, Password) and password.value:
            parts["password"] = password.value
        if replication:
            parts["replication"] = "database"
        return " ".join(f"{k}='{_quote(v)}'" for k, v in parts.items())

    def describe(self) -> str:
        return (
            f"postgresql://{self.values['database.user']}@{self.values['database.hostname']}:"
            f"{self.values['database.port']}/{self.values['database.dbname']}"
        )


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
