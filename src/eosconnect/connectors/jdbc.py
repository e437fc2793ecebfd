"""`JdbcSource`: new rows of database tables into Kafka, exactly once (SQLAlchemy 2).

Modelled on Confluent's JDBC source connector, with SQLAlchemy URLs instead of JDBC ones: SQLite is
built in (`sqlite:////abs/path/db.sqlite`), PostgreSQL works through psycopg
(`postgresql+psycopg://user@host:5432/db`), and any other SQLAlchemy dialect should too.

**Tables and partitions.** Each table in `tables` (or `table.whitelist`) is one source partition
`{"table": <name as configured>}` and goes to the topic `<topic.prefix><name>`. Tables are dealt to
the tasks round robin (table i to task i mod n, n = min(tasks.max, number of tables)). A task polls
its tables in turn, each at most every `poll.interval.ms`, or again at once while a poll returns a
full `batch.max.rows` batch. Records have the incrementing id as key (null without an incrementing
column) and the row as a `Struct` as value, with a schema from the table (column types mapped as
Confluent's JDBC source maps them, `numeric.mapping` included; see `jdbc_schema`). With
`JsonConverter schemas.enable=true` the topic carries the schema for any schema-aware sink; without
it the value is a JSON object whose dates and timestamps are Kafka's numbers and whose decimals
are Kafka's base64 bytes (`numeric.mapping=best_fit` gives plain numbers).

**Modes and offsets.**

* `incrementing`: rows with `incrementing.column.name` greater than the last one read, in id order.
  Offset `{"incrementing": <last id>}`. Only new rows are seen, not updates.
* `timestamp+incrementing`: rows ordered by (timestamp, id) after the last (timestamp, id) read,
  Confluent's tie-break: rows sharing a timestamp are never lost when a batch ends among them.
  Offset `{"timestamp": <ts>, "incrementing": <id>}`. Updated rows are read again when their
  timestamp column moves forward.
* `timestamp`: rows with a timestamp after the last one read. Offset `{"timestamp": <ts>}`. A batch
  never ends in the middle of rows sharing a timestamp (it is shortened or extended), since nothing
  could tell them apart on resume.

In both timestamp modes a poll only reads rows up to *now - `timestamp.delay.interval.ms`* (clock
in `db.timezone` for columns without a time zone). A row's timestamp is usually set when its
transaction starts (`now()`, `CURRENT_TIMESTAMP`) but it becomes visible only at commit: without
the delay, a slow transaction could commit a row with the same or an older timestamp than rows
already read, and it would be skipped. Set the delay above your longest write transaction.
Timestamps are stored in offsets as ISO-8601 strings (numbers for numeric columns, taken as epoch
milliseconds; SQLite's text timestamps verbatim: write them as `YYYY-MM-DD HH:MM:SS[.ffffff]`,
which is what SQLite's CURRENT_TIMESTAMP and SQLAlchemy write, because SQLite compares them as text).

**Exactly once.** Re-reading from a committed offset returns the same rows, so exactly-once
support is SUPPORTED. With `transaction.boundary=connector` each table poll is one transaction:
the task asks for a commit after the last record of every poll. The usual caveat of
incrementing mode applies: a row whose id was allocated before an already-read row's but committed
after it is not seen (use `timestamp+incrementing` with a delay if writers commit out of order).

**Heartbeats (KIP-910).** While a table has no new rows, its offset is still committed every
`heartbeat.interval.ms` through `update_offsets`, as KIP-910 describes for a CDC source's quiet
tables. In the timestamp modes it advances to the point up to which the table was last read
complete: `{"timestamp": <read bound>, "incrementing": null}` (null: every row with that timestamp
was read). In incrementing mode the last id read is committed again: an id position cannot move
without rows, and jumping to the current MAX(id) would skip rows inserted since the last poll.
Both carry `"heartbeat": <epoch ms>`, when the table was last found complete (ignored on resume).
Heartbeats ride on the commits of the busy tables; with `transaction.boundary=interval` they also
go out while every table is idle. Details in `JdbcSourceTask.update_offsets`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from eosconnect.api.config import ConfigDef, ConfigType, ConfigValue, Importance, Password
from eosconnect.api.data import Schema
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.records import Primitive, SourceOffset, SourcePartition, SourceRecord
from eosconnect.api.source import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    ReplaySupport,
    SourceConnector,
    SourceTask,
)
from eosconnect.api.validators import Range, Validator, ValidString
from eosconnect.connectors.jdbc_schema import NumericMapping, RowSchema, key_schema_for, row_schema

__all__ = [
    "CONFIG_DEF",
    "CONNECTION_CONFIG_DEF",
    "HEARTBEAT_FIELD",
    "INCREMENTING_FIELD",
    "TABLE_FIELD",
    "TIMESTAMP_FIELD",
    "JdbcSourceConnector",
    "JdbcSourceTask",
    "Mode",
    "assign_tables",
]

VERSION = "1.0.0"
TABLE_FIELD = "table"
INCREMENTING_FIELD = "incrementing"
TIMESTAMP_FIELD = "timestamp"
HEARTBEAT_FIELD = "heartbeat"
TASK_TABLES_KEY = "task.tables"
#: The longest a `poll()` blocks while no table is due.
MAX_IDLE_WAIT_S = 0.5
TEXT_TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"

log = logging.getLogger(__name__)


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

CONFIG_DEF = (
    ConfigDef(CONNECTION_CONFIG_DEF)
    .define(
        "db.timezone",
        ConfigType.STRING,
        "UTC",
        Importance.MEDIUM,
        "Time zone of timestamp columns without one (IANA name), used to compute the read bound "
        "now - timestamp.delay.interval.ms.",
        Validator.of(timezone_ok, "an IANA time zone name such as UTC or Europe/Paris", "UTC"),
        group="Database",
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

_DB_SETTINGS = ("connection.url", "connection.user", "connection.password")


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


#: Seconds validation waits for a database to answer a connection: without it, validating a URL
#: at a port that never answers (not a database) took the driver's default, over two minutes.
VALIDATION_CONNECT_TIMEOUT_S = 10


def create_engine_for(values: Mapping[str, Any], connect_timeout_s: int | None = None) -> Any:
    """An SQLAlchemy engine for the parsed settings (user/password settings override the URL's);
    `connect_timeout_s` bounds connecting where the driver takes a timeout (PostgreSQL, MySQL)."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    url = make_url(values["connection.url"])
    if values.get("connection.user"):
        url = url.set(username=values["connection.user"])
    password = values.get("connection.password")
    if isinstance(password, Password) and password.value:
        url = url.set(password=password.value)
    connect_args: dict[str, Any] = {}
    if connect_timeout_s is not None and url.get_backend_name() in ("postgresql", "mysql", "mariadb"):
        connect_args["connect_timeout"] = connect_timeout_s
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def sqlite_file(url_text: str) -> str | None:
    """The file a `sqlite:///<path>` URL names (None: not SQLite, or an in-memory database)."""
    from sqlalchemy.engine import make_url

    try:
        url = make_url(url_text)
    except Exception:
        return None
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return url.database


def safe_url(values: Mapping[str, Any]) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(values["connection.url"]).render_as_string(hide_password=True)
    except Exception:
        return "<invalid url>"


def _split_table(name: str) -> tuple[str | None, str]:
    schema, dot, table = name.rpartition(".")
    return (schema, table) if dot else (None, name)


def reflect_table(engine: Any, name: str) -> Any:
    from sqlalchemy import MetaData, Table

    schema, table = _split_table(name)
    return Table(table, MetaData(), autoload_with=engine, schema=schema)


def _cross_field_errors(values: Mapping[str, Any]) -> dict[str, list[str]]:
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


def connection_errors(values: Mapping[str, Any], *, new_sqlite_file_ok: bool = False) -> dict[str, list[str]]:
    """Whether the connection settings reach the database (shared with JdbcSink): {} if so.

    Validation never creates the SQLite file a config names: a missing one is an error, or, with
    `new_sqlite_file_ok` (a sink, whose task creates it), fine when its directory exists."""
    from sqlalchemy.exc import SQLAlchemyError

    database_file = sqlite_file(values["connection.url"])
    if database_file is not None and not os.path.isfile(database_file):
        if not new_sqlite_file_ok:
            return {"connection.url": [f"the SQLite database file {database_file} does not exist"]}
        if not os.path.isdir(os.path.dirname(os.path.abspath(database_file))):
            return {
                "connection.url": [
                    f"cannot connect to {safe_url(values)}: the directory of the SQLite database file "
                    f"{database_file} does not exist"
                ]
            }
        return {}
    try:
        engine = create_engine_for(values, connect_timeout_s=VALIDATION_CONNECT_TIMEOUT_S)
    except Exception as exc:
        return {"connection.url": [f"cannot create a database engine for {safe_url(values)}: {exc}"]}
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        reason = str(exc).splitlines()[0]
        return {"connection.url": [f"cannot connect to {safe_url(values)}: {reason}"]}
    finally:
        engine.dispose()
    return {}


def _database_errors(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """Connect, and check that every table and the mode's columns exist."""
    from sqlalchemy import types as sqltypes
    from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError

    errors = connection_errors(values)
    if errors:
        return errors
    engine = create_engine_for(values, connect_timeout_s=VALIDATION_CONNECT_TIMEOUT_S)
    try:
        mode = Mode(values["mode"])
        for name in table_names(values):
            try:
                table = reflect_table(engine, name)
            except NoSuchTableError:
                errors.setdefault("tables", []).append(
                    f"table {name!r} does not exist in {safe_url(values)}. "
                    "Create it or remove it from tables."
                )
                continue
            except SQLAlchemyError as exc:
                errors.setdefault("tables", []).append(f"cannot read table {name!r}: {exc}")
                continue
            columns = [c.name for c in table.columns]
            for setting, used in (
                (
                    "incrementing.column.name",
                    mode.uses_incrementing or bool(values["incrementing.column.name"]),
                ),
                ("timestamp.column.name", mode.uses_timestamp),
            ):
                column = values[setting]
                if not used or not column:
                    continue
                if column not in table.columns:
                    errors.setdefault(setting, []).append(
                        f"table {name!r} has no column {column!r} (its columns: {', '.join(columns)}). "
                        f"Set {setting} to one of them."
                    )
                elif setting == "incrementing.column.name" and not isinstance(
                    table.columns[column].type, sqltypes.Integer | sqltypes.Numeric
                ):
                    errors.setdefault(setting, []).append(
                        f"column {column!r} of table {name!r} is {table.columns[column].type}, not an "
                        "integer column; the incrementing column must be a strictly increasing number."
                    )
    finally:
        engine.dispose()
    return errors


def check_config(config: Mapping[str, str], *, database: bool = True) -> dict[str, Any]:
    """Parse and check a JdbcSource config; raise one `ConfigException` naming every bad setting."""
    values = CONFIG_DEF.parse(config)
    errors = _cross_field_errors(values)
    if not errors and database:
        errors = _database_errors(values)
    if errors:
        raise ConfigException(errors=errors)
    return values


class JdbcSourceConnector(SourceConnector):
    """Copies new rows of database tables into one topic per table."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        results = CONFIG_DEF.validate(config)
        if any(r.errors for r in results):
            return results
        values = CONFIG_DEF.parse(config)
        errors = _cross_field_errors(values) or _database_errors(values)
        for result in results:
            result.errors.extend(errors.get(result.name, []))
        return results

    def start(self, config: dict[str, str]) -> None:
        self._values = check_config(config)
        self._config = dict(config)
        log.info(
            "JdbcSource: %d table(s) from %s in mode %s",
            len(table_names(self._values)),
            safe_url(self._values),
            self._values["mode"],
        )

    def task_class(self) -> type[SourceTask]:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [
            {**self._config, TASK_TABLES_KEY: json.dumps(tables)}
            for tables in assign_tables(table_names(self._values), max_tasks)
        ]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def replay_support(self, config: Mapping[str, str]) -> ReplaySupport:
        """Rows after an offset come back in (timestamp, id) order, and a batch never ends
        among rows sharing an offset; see the module docstring for the caveat of incrementing mode."""
        return ReplaySupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


# ---------------------------------------------------------------------------------------------- task


class _TsKind(StrEnum):
    DATETIME = "datetime"  # the driver returns datetime objects; offsets hold ISO-8601 strings
    TEXT = "text"  # text compared as text (SQLite); offsets hold the stored text verbatim
    NUMBER = "number"  # epoch milliseconds


@dataclass
class _TableState:
    name: str
    table: Any
    topic: str
    partition: SourcePartition
    rows: RowSchema | None = None  # the value schema; set once the timestamp kind is known
    key_schema: Schema | None = None
    ts_kind: _TsKind | None = None
    ts_aware: bool = False
    incrementing: Any = None  # last id read (None: nothing read yet)
    timestamp: Any = None  # last timestamp read, as bound in queries (None: nothing read yet)
    next_poll: float = 0.0
    # The read bound of the latest poll that found the table complete, and its wall-clock time
    # (ms); None while the latest poll returned a full batch.
    complete_until: Any = None
    complete_at_ms: int | None = None
    uncommitted: int = 0  # records returned by poll() whose offsets are not committed yet
    last_offset_commit: float = field(default_factory=time.monotonic)


class JdbcSourceTask(SourceTask):
    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        values = CONFIG_DEF.parse(config)
        self.mode = Mode(values["mode"])
        self.inc_column: str = values["incrementing.column.name"]
        self.ts_column: str = values["timestamp.column.name"]
        self.prefix: str = values["topic.prefix"]
        self.poll_interval_s = values["poll.interval.ms"] / 1000
        self.batch_max_rows: int = values["batch.max.rows"]
        self.heartbeat_interval_s = values["heartbeat.interval.ms"] / 1000
        self.delay = dt.timedelta(milliseconds=values["timestamp.delay.interval.ms"])
        self.zone = ZoneInfo(values["db.timezone"])
        self.numeric_mapping = NumericMapping(values["numeric.mapping"])
        self.attempts: int = values["connection.attempts"]
        self.backoff_s = values["connection.backoff.ms"] / 1000
        self.url = safe_url(values)
        names = json.loads(config[TASK_TABLES_KEY]) if TASK_TABLES_KEY in config else table_names(values)
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._failures = 0
        self.engine = create_engine_for(values)
        self.tables: dict[str, _TableState] = {}
        partitions = [SourcePartition({TABLE_FIELD: name}) for name in names]
        stored = self.context.offset_storage_reader.offsets(partitions)
        for name, partition in zip(names, partitions, strict=True):
            table = self._call_retrying(
                lambda name=name: reflect_table(self.engine, name), f"reading {name!r}"
            )
            state = _TableState(name, table, self.prefix + name, partition)
            if self.mode.uses_timestamp:
                state.ts_kind, state.ts_aware = self._timestamp_kind(table.columns[self.ts_column].type)
            state.rows = row_schema(
                name,
                list(table.columns),
                dialect=self.engine.dialect.name,
                numeric_mapping=self.numeric_mapping,
                zone=self.zone,
                text_columns=frozenset({self.ts_column} if state.ts_kind is _TsKind.TEXT else ()),
            )
            if self.inc_column:
                state.key_schema = key_schema_for(state.rows.field_schema(self.inc_column))
            self._restore(state, stored.get(partition))
            self.tables[name] = state
        log.info(
            "JdbcSource task: %s from %s",
            ", ".join(self._describe(s) for s in self.tables.values()) or "no tables",
            self.url,
        )

    def _timestamp_kind(self, column_type: Any) -> tuple[_TsKind, bool]:
        from sqlalchemy import types as sqltypes

        aware = bool(getattr(column_type, "timezone", False))
        if isinstance(column_type, sqltypes.DateTime) and self.engine.dialect.name != "sqlite":
            return _TsKind.DATETIME, aware
        if isinstance(column_type, sqltypes.Integer | sqltypes.Numeric | sqltypes.Float):
            return _TsKind.NUMBER, False
        return _TsKind.TEXT, False

    def _describe(self, state: _TableState) -> str:
        if state.incrementing is None and state.timestamp is None:
            return f"{state.name} from the start"
        return f"{state.name} after {self._position(state)}"

    # ------------------------------------------------------------------------------------ offsets

    def _restore(self, state: _TableState, offset: Mapping[str, Primitive] | None) -> None:
        if not offset:
            return
        inc = offset.get(INCREMENTING_FIELD)
        if inc is not None and (isinstance(inc, bool) or not isinstance(inc, int | float)):
            raise ConnectException(
                f"the stored offset of table {state.name!r} is {dict(offset)!r}: {INCREMENTING_FIELD!r} must "
                "be a number. Reset the connector's offsets for this table."
            )
        state.incrementing = inc if self.mode.uses_incrementing else None
        if self.mode.uses_timestamp:
            raw = offset.get(TIMESTAMP_FIELD)
            try:
                state.timestamp = None if raw is None else self._ts_from_offset(state, raw)
            except (TypeError, ValueError) as exc:
                raise ConnectException(
                    f"the stored offset of table {state.name!r} is {dict(offset)!r}: cannot read its "
                    f"{TIMESTAMP_FIELD!r} ({exc}). Reset the connector's offsets for this table."
                ) from exc

    @staticmethod
    def _ts_from_offset(state: _TableState, raw: Primitive) -> Any:
        if state.ts_kind is _TsKind.DATETIME:
            return dt.datetime.fromisoformat(str(raw))
        if state.ts_kind is _TsKind.NUMBER:
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise TypeError(f"expected a number, got {raw!r}")
            return raw
        return str(raw)

    @staticmethod
    def _ts_to_offset(state: _TableState, value: Any) -> Primitive:
        if value is None:
            return None
        if state.ts_kind is _TsKind.DATETIME:
            return value.isoformat()
        if state.ts_kind is _TsKind.NUMBER:
            return _number(value)
        return str(value)

    def _position(
        self, state: _TableState, incrementing: Any = None, timestamp: Any = None
    ) -> dict[str, Primitive]:
        """The offset for a position (the table's current one unless given)."""
        if incrementing is None and timestamp is None:
            incrementing, timestamp = state.incrementing, state.timestamp
        offset: dict[str, Primitive] = {}
        if self.mode.uses_timestamp:
            offset[TIMESTAMP_FIELD] = self._ts_to_offset(state, timestamp)
        if self.mode.uses_incrementing:
            offset[INCREMENTING_FIELD] = _number(incrementing)
        return offset

    def _read_bound(self, state: _TableState) -> Any:
        """now - timestamp.delay.interval.ms, in the form the timestamp column compares with."""
        now = dt.datetime.now(dt.UTC) - self.delay
        if state.ts_kind is _TsKind.NUMBER:
            return int(now.timestamp() * 1000)
        if state.ts_kind is _TsKind.DATETIME and state.ts_aware:
            return now
        local = now.astimezone(self.zone).replace(tzinfo=None)
        return local if state.ts_kind is _TsKind.DATETIME else local.strftime(TEXT_TIMESTAMP_FORMAT)

    # ------------------------------------------------------------------------------------ polling

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.is_set() or not self.tables:
            self._stopping.wait(MAX_IDLE_WAIT_S)
            return None
        state = min(self.tables.values(), key=lambda s: s.next_poll)
        wait = state.next_poll - time.monotonic()
        if wait > 0:
            self._stopping.wait(min(wait, MAX_IDLE_WAIT_S))
            return None
        try:
            rows, bound, complete = self._query(state)
        except _Retry:
            return None
        polled_ms = int(time.time() * 1000)
        incrementing, timestamp = state.incrementing, state.timestamp
        records = []
        for row in rows:
            if self.mode.uses_incrementing:
                incrementing = row[self.inc_column]
            if self.mode.uses_timestamp:
                timestamp = row[self.ts_column]
            records.append(self._record(state, row, self._position(state, incrementing, timestamp)))
        # One step, so that update_offsets (maybe on another thread) never sees a position that is
        # ahead of the records handed to the runtime, nor a half-updated one.
        with self._lock:
            state.incrementing, state.timestamp = incrementing, timestamp
            state.uncommitted += len(records)
            state.complete_until, state.complete_at_ms = (bound, polled_ms) if complete else (None, None)
        state.next_poll = time.monotonic() + (self.poll_interval_s if complete else 0)
        if not records:
            return None
        txn = self.context.transaction_context
        if txn is not None:
            txn.commit_transaction(records[-1])  # one transaction per table poll
        return records

    def _record(
        self, state: _TableState, row: Mapping[str, Any], offset: dict[str, Primitive]
    ) -> SourceRecord:
        assert state.rows is not None
        return SourceRecord(
            source_partition=state.partition,
            source_offset=offset,
            topic=state.topic,
            key=_number(row[self.inc_column]) if self.inc_column else None,
            value=state.rows.struct(row),
            key_schema=state.key_schema,
            value_schema=state.rows.schema,
        )

    def _query(self, state: _TableState) -> tuple[list[dict[str, Any]], Any, bool]:
        """The next rows of a table, the read bound used, and whether the table is now complete
        (the query returned fewer than batch.max.rows rows: every row up to the bound is read)."""
        from sqlalchemy import String, and_, or_, select, type_coerce

        table = state.table
        columns: list[Any] = list(table.columns)
        ts: Any = None
        if self.mode.uses_timestamp:
            ts = table.columns[self.ts_column]
            if state.ts_kind is _TsKind.TEXT:
                columns = [type_coerce(c, String).label(c.name) if c is ts else c for c in columns]
                ts = type_coerce(ts, String)
        inc = table.columns[self.inc_column] if self.inc_column else None
        limit = self.batch_max_rows
        bound = self._read_bound(state) if ts is not None else None
        stmt = select(*columns)
        if self.mode is Mode.INCREMENTING:
            if state.incrementing is not None:
                stmt = stmt.where(inc > state.incrementing)
            stmt = stmt.order_by(inc)
        else:
            stmt = stmt.where(ts <= bound)
            if state.timestamp is not None:
                if self.mode is Mode.TIMESTAMP_INCREMENTING and state.incrementing is not None:
                    stmt = stmt.where(
                        or_(ts > state.timestamp, and_(ts == state.timestamp, inc > state.incrementing))
                    )
                else:  # timestamp mode, or every row with this timestamp was read (a heartbeat)
                    stmt = stmt.where(ts > state.timestamp)
            stmt = stmt.order_by(ts, inc) if self.mode is Mode.TIMESTAMP_INCREMENTING else stmt.order_by(ts)

        def run() -> tuple[list[dict[str, Any]], bool]:
            with self.engine.connect() as conn:
                rows = [dict(r) for r in conn.execute(stmt.limit(limit)).mappings()]
                full = len(rows) >= limit
                if self.mode is Mode.TIMESTAMP and full:
                    rows = self._whole_timestamps(conn, stmt, ts, rows)
                return rows, full

        rows, full = self._call(run, f"polling table {state.name!r}")
        return rows, bound, not full

    def _whole_timestamps(
        self, conn: Any, stmt: Any, ts: Any, rows: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Timestamp mode: never end a batch among rows sharing a timestamp (they could not be told
        apart on resume). Drop the trailing group; if the whole batch is one timestamp, read it all."""
        last = rows[-1][self.ts_column]
        kept = [r for r in rows if r[self.ts_column] != last]
        if kept:
            return kept
        return [dict(r) for r in conn.execute(stmt.where(ts == last)).mappings()]

    def _call(self, fn: Any, doing: str) -> Any:
        """Run a database call. A transient failure (connection lost, database locked) waits
        connection.backoff.ms and raises `_Retry`; after connection.attempts in a row, or on any
        other error, the task fails."""
        from sqlalchemy.exc import DBAPIError, OperationalError

        try:
            result = fn()
        except DBAPIError as exc:
            transient = isinstance(exc, OperationalError) or exc.connection_invalidated
            self._failures += 1
            reason = str(exc).splitlines()[0]
            if not transient or self._failures >= self.attempts:
                raise ConnectException(
                    f"database error while {doing} on {self.url} ({self._failures} consecutive failure(s), "
                    f"connection.attempts={self.attempts}): {reason}"
                ) from exc
            log.warning(
                "database error while %s (attempt %d of %d), retrying: %s",
                doing,
                self._failures,
                self.attempts,
                reason,
            )
            self._stopping.wait(self.backoff_s)
            raise _Retry from exc
        self._failures = 0
        return result

    def _call_retrying(self, fn: Any, doing: str) -> Any:
        while True:
            try:
                return self._call(fn, doing)
            except _Retry:
                if self._stopping.is_set():
                    raise ConnectException(f"stopped while {doing}") from None

    # ------------------------------------------------------------------------------------ commits

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        state = self.tables.get(str(record.source_partition.get(TABLE_FIELD)))
        if state is not None:
            with self._lock:
                state.uncommitted = max(0, state.uncommitted - 1)

    def update_offsets(
        self, offsets: dict[SourcePartition, SourceOffset]
    ) -> Mapping[SourcePartition, Mapping[str, Primitive]] | None:
        """KIP-910 heartbeat: commit offsets for tables that produced no rows in this commit.

        KIP-910's case is a CDC source whose position (an LSN, a binlog position) keeps moving
        while the tracked tables are quiet: the connector commits the *current source position*
        for the quiet partitions so that their offsets stay fresh and a restart re-reads as little
        as possible. For a table polled by query, the position up to which the source has been
        read is the read bound of the last poll that found the table complete (it returned fewer
        than `batch.max.rows` rows): every row up to that bound has been emitted.

        * Timestamp modes: the offset advances to that bound, `{"timestamp": <bound>,
          "incrementing": null}` (null: every row with this timestamp was read), so a restart
          resumes from the bound rather than from the last row, however long ago that was.
        * Incrementing mode: nothing advances a position made of row ids without new rows. Jumping
          to the current `MAX(id)` would be wrong: an id above the last one read belongs to a row
          not read yet (inserted since the poll), and skipping it loses data. So the last id read
          is committed again.

        Either way the offset carries `"heartbeat": <epoch ms of that poll>`, the time up to which
        the table is known complete (it is ignored on resume). A heartbeat is sent for a table at
        most every `heartbeat.interval.ms`, only while all of its records returned by `poll()` are
        committed (at-least-once mode calls this before in-flight records are acknowledged, and
        moving past them could lose them), and only for tables polled since the task started.

        When the runtime calls this: under exactly-once at every transaction commit (with
        `transaction.boundary=connector`, after each table poll that returned rows; with
        `interval`, also at the end of intervals without any rows, so heartbeats go on while every
        table is idle), and at every offset flush in at-least-once mode.
        """
        if self.heartbeat_interval_s <= 0:
            return None
        now = time.monotonic()
        heartbeats: dict[SourcePartition, dict[str, Primitive]] = {}
        with self._lock:
            for state in self.tables.values():
                if state.partition in offsets:
                    state.last_offset_commit = now
                    continue
                if (
                    state.complete_at_ms is None
                    or state.uncommitted
                    or now - state.last_offset_commit < self.heartbeat_interval_s
                ):
                    continue
                heartbeats[state.partition] = self._heartbeat_offset(state)
                state.last_offset_commit = now
        if not heartbeats:
            return None
        return {**offsets, **heartbeats}

    def _heartbeat_offset(self, state: _TableState) -> dict[str, Primitive]:
        offset = self._position(state)
        bound = state.complete_until
        if self.mode.uses_timestamp and bound is not None and _after(bound, state.timestamp):
            offset[TIMESTAMP_FIELD] = self._ts_to_offset(state, bound)
            if self.mode is Mode.TIMESTAMP_INCREMENTING:
                offset[INCREMENTING_FIELD] = None
        offset[HEARTBEAT_FIELD] = state.complete_at_ms
        return offset

    def stop(self) -> None:
        self._stopping.set()
        engine = self.__dict__.get("engine")
        if engine is not None:
            engine.dispose()


class _Retry(Exception):
    """A transient database failure: return nothing from this poll and try again later."""


def _after(bound: Any, position: Any) -> bool:
    if position is None:
        return True
    try:
        return bool(bound > position)
    except TypeError:  # e.g. a naive and an aware datetime after a column change
        return False


def _number(value: Any) -> Primitive:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return str(value)
