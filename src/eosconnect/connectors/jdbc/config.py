"""JdbcSource's settings: the ConfigDefs (the connection part shared with JdbcSink), the modes, the
tables and how they are dealt to tasks, and the checks that need no database."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.validators import Range, Validator, ValidString
from eosconnect.connectors.jdbc.schema import NumericMapping

__all__ = [
    "CONFIG_DEF",
    "CONNECTION_CONFIG_DEF",
    "HEARTBEAT_FIELD",
    "INCREMENTING_FIELD",
    "TABLE_FIELD",
    "TASK_TABLES_KEY",
    "TIMESTAMP_FIELD",
    "VERSION",
    "Mode",
    "assign_tables",
    "connection_config_def",
    "cross_field_errors",
    "table_names",
    "timezone_ok",
]

VERSION = "1.0.0"
TABLE_FIELD = "table"
INCREMENTING_FIELD = "incrementing"
TIMESTAMP_FIELD = "timestamp"
HEARTBEAT_FIELD = "heartbeat"
TASK_TABLES_KEY = "task.tables"


class Mode(StrEnum):
    INCREMENTING = "incrementing"
    TIMESTAMP = "timestamp"
    TIMESTAMP_INCREMENTING = "timestamp+incrementing"

    @property
    def uses_incrementing(self) -> bool:
        return self is not Mode.TIMESTAMP

    @property
    def uses_timestamp(self) -> bool:
        return self is not Mode.INCREMENTING


def _url_ok(value: Any) -> bool:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(value)
    except (ArgumentError, ValueError):
        return False
    return True


def timezone_ok(value: Any) -> bool:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


#: The database connection settings, shared by JdbcSource and JdbcSink (connectors/jdbc_sink).
CONNECTION_CONFIG_DEF = (
    ConfigDef()
    .define(
        "connection.url",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation=(
            "SQLAlchemy database URL, e.g. sqlite:////var/data/shop.db (SQLite is built in: use an "
            "absolute path, the Spark executors open it) or postgresql+psycopg://app@db:5432/shop."
        ),
        validator=Validator.of(_url_ok, "an SQLAlchemy URL such as sqlite:////tmp/db.sqlite", "sqlite:///x"),
        group="Database",
    )
    .define(
        "connection.user",
        ConfigType.STRING,
        None,
        Importance.HIGH,
        "Database user; overrides the user in connection.url.",
        group="Database",
    )
    .define(
        "connection.password",
        ConfigType.PASSWORD,
        None,
        Importance.HIGH,
        "Database password; overrides the password in connection.url (never logged).",
        group="Database",
    )
    .define(
        "connection.attempts",
        ConfigType.INT,
        3,
        Importance.LOW,
        "Consecutive failed database calls (connection lost, database locked) tolerated before the "
        "task fails; each failure is retried after connection.backoff.ms.",
        Range.at_least(1),
        group="Database",
    )
    .define(
        "connection.backoff.ms",
        ConfigType.LONG,
        2000,
        Importance.LOW,
        "Wait before retrying a failed database call.",
        Range.at_least(0),
        group="Database",
    )
)


def connection_config_def(timezone_doc: str) -> ConfigDef:
    """The settings JdbcSource and JdbcSink share: `CONNECTION_CONFIG_DEF` and `db.timezone` (an
    IANA name, default UTC), whose documentation (`timezone_doc`) says what the connector uses it for."""
    return ConfigDef(CONNECTION_CONFIG_DEF).define(
        "db.timezone",
        ConfigType.STRING,
        "UTC",
        Importance.MEDIUM,
        timezone_doc,
        Validator.of(timezone_ok, "an IANA time zone name such as UTC or Europe/Paris", "UTC"),
        group="Database",
    )


CONFIG_DEF = (
    connection_config_def(
        "Time zone of timestamp columns without one (IANA name), used to compute the read bound "
        "now - timestamp.delay.interval.ms."
    )
    .define(
        "tables",
        ConfigType.LIST,
        [],
        Importance.HIGH,
        "Tables to copy, comma-separated (schema.table for another schema). One of tables or "
        "table.whitelist is required.",
        group="Tables",
    )
    .define(
        "table.whitelist",
        ConfigType.LIST,
        [],
        Importance.LOW,
        "Confluent's name for tables; both lists are combined.",
        group="Tables",
    )
    .define(
        "mode",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation=(
            "How new rows are found: incrementing (a strictly increasing id column), timestamp (a "
            "last-modified column), or timestamp+incrementing (both; the safest)."
        ),
        validator=ValidString.in_(*(m.value for m in Mode)),
        group="Mode",
    )
    .define(
        "incrementing.column.name",
        ConfigType.STRING,
        "",
        Importance.MEDIUM,
        "Strictly increasing integer column (e.g. an auto-increment primary key); required by the "
        "incrementing modes, and the record key whenever set.",
        group="Mode",
    )
    .define(
        "timestamp.column.name",
        ConfigType.STRING,
        "",
        Importance.MEDIUM,
        "Last-modified timestamp column; required by the timestamp modes.",
        group="Mode",
    )
    .define(
        "numeric.mapping",
        ConfigType.STRING,
        "none",
        Importance.LOW,
        "How NUMERIC/DECIMAL columns map to Connect types, as Confluent's setting: none (the logical "
        "Decimal), precision_only (NUMERIC(p,0) with p <= 18 as the smallest integer type), best_fit "
        "(also NUMERIC(p,s) with p <= 18 as FLOAT64).",
        validator=ValidString.in_(*(m.value for m in NumericMapping)),
        group="Mode",
    )
    .define(
        "timestamp.delay.interval.ms",
        ConfigType.LONG,
        1000,
        Importance.MEDIUM,
        "Timestamp modes read rows only up to now minus this delay, so that rows committed late with "
        "an earlier or equal timestamp are not skipped. Keep it above the longest write transaction.",
        Range.at_least(0),
        group="Mode",
    )
    .define(
        "topic.prefix",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="Prefix of the topic names: rows of table T go to <topic.prefix>T (may be empty).",
        group="Connector",
    )
    .define(
        "poll.interval.ms",
        ConfigType.INT,
        5000,
        Importance.HIGH,
        "How often each table is checked for new rows (a table that just returned a full batch is "
        "polled again at once).",
        Range.at_least(1),
        group="Connector",
    )
    .define(
        "batch.max.rows",
        ConfigType.INT,
        100,
        Importance.LOW,
        "Maximum rows per table per poll; with transaction.boundary=connector also the largest transaction.",
        Range.at_least(1),
        group="Connector",
    )
    .define(
        "heartbeat.interval.ms",
        ConfigType.LONG,
        10000,
        Importance.LOW,
        "KIP-910: how often the offset of a table without new rows is committed anyway, advanced to "
        "the point up to which the table was found complete (0 disables it).",
        Range.at_least(0),
        group="Connector",
    )
)


def table_names(values: Mapping[str, Any]) -> list[str]:
    """The configured tables, `tables` then `table.whitelist`, without duplicates, in order."""
    names: list[str] = []
    for name in [*values.get("tables", []), *values.get("table.whitelist", [])]:
        name = name.strip()
        if name and name not in names:
            names.append(name)
    return names


def assign_tables(tables: list[str], max_tasks: int) -> list[list[str]]:
    """Round robin: table i goes to task i mod n, n = min(max_tasks, len(tables))."""
    count = max(1, min(max_tasks, len(tables)))
    return [tables[i::count] for i in range(count)]


def cross_field_errors(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """Checks involving several settings (no database access)."""
    errors: dict[str, list[str]] = {}
    if not table_names(values):
        errors["tables"] = [
            "no table is configured. Set tables to a comma-separated list of tables such as orders,customers."
        ]
    mode = Mode(values["mode"])
    if mode.uses_incrementing and not values["incrementing.column.name"]:
        errors["incrementing.column.name"] = [
            f"is required with mode={mode.value}. Set incrementing.column.name to the table's "
            "auto-increment id column, such as id."
        ]
    if mode.uses_timestamp and not values["timestamp.column.name"]:
        errors["timestamp.column.name"] = [
            f"is required with mode={mode.value}. Set timestamp.column.name to the table's last-modified "
            "column, such as updated_at."
        ]
    return errors
