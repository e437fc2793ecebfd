"""JdbcSink's settings: Confluent's JDBC sink names, plus `exactly.once` and the offsets table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy.engine import make_url

from eosconnect.api.config import ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.api.sink import SINK_TOPICS_CONFIG_DEF
from eosconnect.api.validators import Range, ValidString
from eosconnect.connectors.jdbc import connection_config_def

__all__ = ["CONFIG_DEF", "InsertMode", "PkMode", "QuoteIdentifiers", "SinkSettings", "parse_settings"]


class InsertMode(StrEnum):
    INSERT = "insert"
    UPSERT = "upsert"
    UPDATE = "update"


class PkMode(StrEnum):
    NONE = "none"
    KAFKA = "kafka"
    RECORD_KEY = "record_key"
    RECORD_VALUE = "record_value"


class QuoteIdentifiers(StrEnum):
    ALWAYS = "always"
    NEVER = "never"


#: Confluent's column names for pk.mode=kafka (pk.fields renames them, in this order).
KAFKA_PK_COLUMNS = ("__connect_topic", "__connect_partition", "__connect_offset")
OFFSETS_TABLE_DEFAULT = "eosconnect_sink_offsets"
#: Debezium's `unavailable.value.placeholder`: what a CDC source writes for a value it does not have.
PLACEHOLDER_DEFAULT = "__debezium_unavailable_value"
#: A healthy flush never idles this long between two statements; a frozen task blocks its successor
#: at most this long (see `dialect.transactional_engine`).
IDLE_TRANSACTION_TIMEOUT_MS_DEFAULT = 30_000

CONFIG_DEF = (
    connection_config_def(
        "Time zone (IANA name) in which Timestamp, Date and Time values are written into columns without "
        "a time zone."
    )
    .define(
        "insert.mode",
        ConfigType.STRING,
        "insert",
        Importance.HIGH,
        "insert: plain INSERTs; upsert: insert or update by the primary key (INSERT .. ON CONFLICT); "
        "update: UPDATE by the primary key (rows that do not exist are not created).",
        ValidString.in_(*(m.value for m in InsertMode)),
        group="Writes",
    )
    .define(
        "pk.mode",
        ConfigType.STRING,
        "none",
        Importance.HIGH,
        "Where the primary key columns come from: none; kafka (topic, partition and offset as "
        "__connect_topic, __connect_partition, __connect_offset); record_key (the key's fields, or the "
        "key itself as the one column named in pk.fields); record_value (fields of the value).",
        ValidString.in_(*(m.value for m in PkMode)),
        group="Writes",
    )
    .define(
        "pk.fields",
        ConfigType.LIST,
        [],
        Importance.MEDIUM,
        "The primary key columns: with pk.mode=kafka new names for the three columns; with record_key the "
        "key's fields (all if empty) or the column name of a primitive key; with record_value the value's "
        "fields (all if empty).",
        group="Writes",
    )
    .define(
        "fields.whitelist",
        ConfigType.LIST,
        [],
        Importance.MEDIUM,
        "Value fields written as columns (empty: all). Primary key columns are always written.",
        group="Writes",
    )
    .define(
        "delete.enabled",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "A tombstone (null value) deletes the row with the record's key (needs pk.mode=record_key); "
        "false: tombstones are skipped.",
        group="Writes",
    )
    .define(
        "table.name.format",
        ConfigType.STRING,
        "${topic}",
        Importance.MEDIUM,
        "The table each record goes to; ${topic} is replaced by the record's topic (e.g. kafka_${topic}; "
        "schema.table for another schema).",
        group="Writes",
    )
    .define(
        "batch.size",
        ConfigType.INT,
        3000,
        Importance.MEDIUM,
        "Rows per bulk statement (executemany); this many buffered rows also ask for a flush.",
        Range.at_least(1),
        group="Writes",
    )
    .define(
        "quote.sql.identifiers",
        ConfigType.STRING,
        "always",
        Importance.LOW,
        "always: table and column names are quoted (case and special characters kept); never: they are "
        "written as they are.",
        ValidString.in_(*(m.value for m in QuoteIdentifiers)),
        group="Writes",
    )
    .define(
        "auto.create",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Create a missing table (CREATE TABLE) from the record's schema, with the primary key of pk.mode.",
        group="DDL",
    )
    .define(
        "auto.evolve",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Add missing columns (ALTER TABLE ADD, always nullable) when records carry new fields.",
        group="DDL",
    )
    .define(
        "exactly.once",
        ConfigType.BOOLEAN,
        True,
        Importance.HIGH,
        "true: every flush writes the rows and the consumed positions into offsets.table.name in one "
        "database transaction, tasks resume from the positions found there and stale tasks are fenced "
        "by the database: no row is lost or repeated, in any insert.mode. false: at least once (the "
        "consumer group's offsets are the truth).",
        group="Exactly once",
    )
    .define(
        "offsets.table.name",
        ConfigType.STRING,
        OFFSETS_TABLE_DEFAULT,
        Importance.LOW,
        "The table (created if missing) holding each partition's next offset, leader epoch and fencing "
        "generation per connector, with exactly.once=true.",
        group="Exactly once",
    )
    .define(
        "idle.transaction.timeout.ms",
        ConfigType.INT,
        IDLE_TRANSACTION_TIMEOUT_MS_DEFAULT,
        Importance.LOW,
        "How long the database lets one of the sink's sessions sit idle inside an open transaction "
        "before it ends that session (PostgreSQL idle_in_transaction_session_timeout, MariaDB "
        "idle_transaction_timeout; 0: never). A task frozen mid-flush (SIGSTOPped, swapped out, "
        "paused) holds the offsets rows' locks; this bounds how long its successor waits for them. "
        "The frozen task's commit then fails and it is fenced. Keep it well above the longest pause "
        "between two statements of a healthy flush.",
        Range.at_least(0),
        group="Exactly once",
    )
    .define(
        "unavailable.value.placeholder",
        ConfigType.STRING,
        PLACEHOLDER_DEFAULT,
        Importance.LOW,
        "The value a CDC source writes for an unchanged TOASTed column it does not have (the source's "
        "setting of the same name): a column holding it (as text, as bytes, or as a one-element array) is "
        "left as it is in the target row, never overwritten with the placeholder. Empty: off.",
        group="Writes",
    )
    .merge(SINK_TOPICS_CONFIG_DEF)
)


@dataclass(frozen=True)
class SinkSettings:
    """The parsed, cross-checked settings a task works with."""

    values: Mapping[str, Any]
    insert_mode: InsertMode
    pk_mode: PkMode
    pk_fields: tuple[str, ...]
    fields_whitelist: frozenset[str]
    delete_enabled: bool
    table_format: str
    batch_size: int
    quote: bool
    auto_create: bool
    auto_evolve: bool
    exactly_once: bool
    offsets_table: str
    timezone: str
    #: The database's SQLAlchemy backend name (postgresql, mysql, mariadb, sqlite, ...).
    dialect: str
    placeholder: str

    def table_for(self, topic: str) -> str:
        return self.table_format.replace("${topic}", topic)


def cross_field_errors(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """Combinations Confluent's sink refuses too, each with the fix."""
    errors: dict[str, list[str]] = {}
    insert_mode, pk_mode = InsertMode(values["insert.mode"]), PkMode(values["pk.mode"])
    if insert_mode is not InsertMode.INSERT and pk_mode is PkMode.NONE:
        errors["pk.mode"] = [
            f"insert.mode={insert_mode.value} writes by primary key, but pk.mode=none has none. Set pk.mode "
            "to record_key, record_value or kafka, or insert.mode=insert."
        ]
    if values["delete.enabled"] and pk_mode is not PkMode.RECORD_KEY:
        errors["delete.enabled"] = [
            "deleting by tombstone needs the key of the row from the record's key: set pk.mode=record_key, "
            "or delete.enabled=false."
        ]
    if pk_mode is PkMode.KAFKA and values["pk.fields"] and len(values["pk.fields"]) != 3:
        errors["pk.fields"] = [
            "with pk.mode=kafka, pk.fields names the three columns (topic, partition, offset) or is empty."
        ]
    if "${topic}" not in values["table.name.format"] and not values["table.name.format"].strip():
        errors["table.name.format"] = ["is empty. Set it to a table name, or ${topic}."]
    return errors


def _backend(url: str) -> str:
    try:
        return make_url(url).get_backend_name()
    except Exception:  # a bad URL is reported where the engine is made, naming connection.url
        return ""


def parse_settings(config: Mapping[str, str]) -> SinkSettings:
    """Parse and check; one `ConfigException` naming every bad setting."""
    values = CONFIG_DEF.parse(config)
    errors = cross_field_errors(values)
    if errors:
        raise ConfigException(errors=errors)
    return SinkSettings(
        values=values,
        insert_mode=InsertMode(values["insert.mode"]),
        pk_mode=PkMode(values["pk.mode"]),
        pk_fields=tuple(f.strip() for f in values["pk.fields"] if f.strip()),
        fields_whitelist=frozenset(f.strip() for f in values["fields.whitelist"] if f.strip()),
        delete_enabled=bool(values["delete.enabled"]),
        table_format=values["table.name.format"],
        batch_size=int(values["batch.size"]),
        quote=QuoteIdentifiers(values["quote.sql.identifiers"]) is QuoteIdentifiers.ALWAYS,
        auto_create=bool(values["auto.create"]),
        auto_evolve=bool(values["auto.evolve"]),
        exactly_once=bool(values["exactly.once"]),
        offsets_table=values["offsets.table.name"],
        timezone=values["db.timezone"],
        dialect=_backend(values["connection.url"]),
        placeholder=values["unavailable.value.placeholder"],
    )
