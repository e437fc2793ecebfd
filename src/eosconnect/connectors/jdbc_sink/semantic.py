"""The meaning of a column's Connect schema: how its values go to the database, and which column
type `auto.create` gives it.

A record's schema says more than its type: an INT32 named `io.debezium.time.Date` is a day, not a
number, and a STRUCT named `io.debezium.data.VariableScaleDecimal` is a number, not a row. Written as
their raw types such values land as wrong data (7306 instead of 1990-01-02) or are refused by a
table of the source's own DDL. So each column's schema is read once per shape into a *writer*, the
function that turns its values into what the driver binds as the database's own type, and into a
column type. Kafka's logical types (Decimal, Date, Time, Timestamp) and Debezium's semantic types are
both understood, as Debezium's JDBC sink understands them:

====================================  ==============================  ===========================
schema (name)                         value written                   auto.create (PostgreSQL)
====================================  ==============================  ===========================
Decimal (connect.decimal.precision)   as it is                        NUMERIC(p, s)
io.debezium.data.VariableScaleDecimal the number                      NUMERIC
Date / io.debezium.time.Date          the day                         DATE
Time / io.debezium.time.Time,         the time of day                 TIME
MicroTime, NanoTime
io.debezium.time.ZonedTime            its ISO text                    TIME WITH TIME ZONE
Timestamp                             in db.timezone                  TIMESTAMP
io.debezium.time.Timestamp,           the wall-clock time             TIMESTAMP
MicroTimestamp, NanoTimestamp
io.debezium.time.ZonedTimestamp       the instant                     TIMESTAMP WITH TIME ZONE
io.debezium.time.MicroDuration        the duration                    INTERVAL
io.debezium.time.Interval             its ISO-8601 text               INTERVAL
io.debezium.data.Uuid                 as it is                        UUID
io.debezium.data.Json                 its text, as written            JSON
io.debezium.data.Xml                  as it is                        XML
ARRAY                                 a list of its elements' values  <element>[]
STRUCT, MAP                           JSON text                       TEXT
====================================  ==============================  ===========================

Other databases get the nearest type (TEXT for UUID, JSON, XML and arrays - arrays as JSON text -,
BIGINT for MicroDuration, a naive DATETIME in `db.timezone` for instants). Into PostgreSQL values are
bound untyped (see `dialect.write_statement`), so the server reads them as the target column's type:
text into json, inet, an enum or a domain arrives exactly as the source wrote it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from eosconnect.api.data import Decimal, Schema, Struct, Type
from eosconnect.api.data.schema import (
    DATE_LOGICAL_NAME,
    DECIMAL_LOGICAL_NAME,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
)
from eosconnect.connectors.json_values import json_compatible

__all__ = ["Writer", "column_type", "generic", "writer"]

#: A column's values as the driver takes them.
Writer = Callable[[Any], Any]

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)
#: The decimal precision of Kafka's Decimal schemas (a parameter, set by Debezium and Confluent).
PRECISION_PARAMETER = "connect.decimal.precision"

DEBEZIUM_DATE = "io.debezium.time.Date"
DEBEZIUM_TIME = {
    "io.debezium.time.Time": 1_000,
    "io.debezium.time.MicroTime": 1,
    "io.debezium.time.NanoTime": -1_000,
}
DEBEZIUM_TIMESTAMP = {
    "io.debezium.time.Timestamp": 1_000,
    "io.debezium.time.MicroTimestamp": 1,
    "io.debezium.time.NanoTimestamp": -1_000,
}
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
ZONED_TIME = "io.debezium.time.ZonedTime"
MICRO_DURATION = "io.debezium.time.MicroDuration"
INTERVAL = "io.debezium.time.Interval"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
UUID = "io.debezium.data.Uuid"
JSON = "io.debezium.data.Json"
XML = "io.debezium.data.Xml"

_MICROS_PER_DAY = 86_400_000_000


def _micros(value: int, per_unit: int) -> int:
    """`value` in microseconds: `per_unit` microseconds per unit, or a negative divisor (nanoseconds)."""
    return value * per_unit if per_unit > 0 else value // -per_unit


def _time_of_day(per_unit: int) -> Writer:
    def convert(value: Any) -> Any:
        micros = _micros(int(value), per_unit)
        if micros >= _MICROS_PER_DAY:  # PostgreSQL's 24:00:00, which Python's time cannot hold
            return "24:00:00"
        seconds, micro = divmod(micros, 1_000_000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        return dt.time(hour, minute, second, micro)

    return convert


def _wall_clock(per_unit: int) -> Writer:
    return lambda value: EPOCH + dt.timedelta(microseconds=_micros(int(value), per_unit))


def _day(value: Any) -> dt.date:
    return EPOCH_DATE + dt.timedelta(days=int(value))


def _duration(value: Any) -> str:
    """A MicroDuration as an interval of whole days and the rest (a day being 24 hours, as Debezium
    counts it): `-00:00:01` comes back as itself, not as `-1 days +23:59:59`."""
    days, micros = divmod(abs(int(value)), _MICROS_PER_DAY)
    sign = "-" if int(value) < 0 else ""
    return f"{sign}{days} days {sign}{micros} microseconds"


def _variable_decimal(value: Any) -> decimal.Decimal:
    unscaled = int.from_bytes(value.get("value"), "big", signed=True)
    return Decimal.from_unscaled(unscaled, int(value.get("scale")))


def _instant_in(zone: ZoneInfo) -> Writer:
    """An aware instant as the naive wall-clock time of `zone` (columns without a time zone)."""

    def convert(value: Any) -> Any:
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.astimezone(zone).replace(tzinfo=None)
        return value

    return convert


def _elements(element: Writer) -> Writer:
    return lambda value: [None if v is None else element(v) for v in value]


def writer(schema: Schema, zone: ZoneInfo, dialect: str) -> Writer | None:
    """How values of a column of this schema go to a `dialect` database; None: as they are."""
    name, postgres = schema.name, dialect == "postgresql"
    if name in (DECIMAL_LOGICAL_NAME, DATE_LOGICAL_NAME):
        return None
    if name == DEBEZIUM_DATE:
        return _day
    if name == TIME_LOGICAL_NAME:
        return lambda value: value.replace(tzinfo=None)
    if name in DEBEZIUM_TIME:
        return _time_of_day(DEBEZIUM_TIME[name])
    if name == TIMESTAMP_LOGICAL_NAME:
        return _instant_in(zone)
    if name in DEBEZIUM_TIMESTAMP:
        return _wall_clock(DEBEZIUM_TIMESTAMP[name])
    if name == ZONED_TIMESTAMP:
        return None if postgres else _instant_in(zone)
    if name == MICRO_DURATION:
        return _duration if postgres else None
    if name == VARIABLE_SCALE_DECIMAL:
        return _variable_decimal
    if schema.type is Type.ARRAY:
        if not postgres:
            return _as_json
        element = None if schema.value_schema is None else writer(schema.value_schema, zone, dialect)
        return None if element is None else _elements(element)
    if schema.type in (Type.STRUCT, Type.MAP):
        return _as_json
    return None


def generic(zone: ZoneInfo) -> Writer:
    """How a value whose schema says no more is written, by what it is (schemaless JSON): an
    instant in `zone` without a zone (the columns are TIMESTAMP without time zone), nested values as
    JSON text."""
    instant = _instant_in(zone)

    def convert(value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return instant(value)
        if isinstance(value, dt.time):
            return value.replace(tzinfo=None)
        return _as_json(value)

    return convert


def _as_json(value: Any) -> Any:
    """A nested value (struct, map, list) as JSON text; anything else as it is."""
    if isinstance(value, Struct):
        return json.dumps({f.name: json_compatible(value.get(f.name)) for f in value.schema.fields})
    if isinstance(value, dict | list):
        return json.dumps(json_compatible(value))
    return value


def column_type(schema: Schema, dialect: str) -> sa.types.TypeEngine[Any]:
    """The column type `auto.create` and `auto.evolve` give values of this schema."""
    name, postgres = schema.name, dialect == "postgresql"
    parameters = schema.parameters or {}
    if name == DECIMAL_LOGICAL_NAME:
        scale = int(parameters.get("scale", "0"))
        precision = parameters.get(PRECISION_PARAMETER)
        if precision is not None:
            return sa.Numeric(precision=int(precision), scale=scale, asdecimal=True)
        return sa.Numeric(precision=None if scale == 0 else 38, scale=scale, asdecimal=True)
    if name == VARIABLE_SCALE_DECIMAL:
        return sa.Numeric(asdecimal=True)
    if name in (DATE_LOGICAL_NAME, DEBEZIUM_DATE):
        return sa.Date()
    if name == TIME_LOGICAL_NAME or name in DEBEZIUM_TIME:
        return sa.Time()
    if name == TIMESTAMP_LOGICAL_NAME or name in DEBEZIUM_TIMESTAMP:
        return sa.DateTime()
    if name == ZONED_TIMESTAMP:
        return sa.DateTime(timezone=True) if postgres else sa.DateTime()
    if name == ZONED_TIME and postgres:
        return sa.Time(timezone=True)
    if name in (MICRO_DURATION, INTERVAL) and postgres:
        return postgresql.INTERVAL()
    if name == UUID and postgres:
        return postgresql.UUID()
    if name == JSON and postgres:
        return postgresql.JSON()
    if name == XML and postgres:
        return _Xml()
    if schema.type is Type.ARRAY and postgres and schema.value_schema is not None:
        return postgresql.ARRAY(column_type(schema.value_schema, dialect))
    simple: dict[Type, sa.types.TypeEngine[Any]] = {
        Type.INT8: sa.SmallInteger(),
        Type.INT16: sa.SmallInteger(),
        Type.INT32: sa.Integer(),
        Type.INT64: sa.BigInteger(),
        Type.FLOAT32: sa.Float(precision=24),
        Type.FLOAT64: sa.Double(),
        Type.BOOLEAN: sa.Boolean(),
        Type.STRING: sa.Text(),
        Type.BYTES: sa.LargeBinary(),
    }
    return simple.get(schema.type, sa.Text())  # ARRAY (elsewhere), MAP, STRUCT: JSON text


class _Xml(sa.types.UserDefinedType[str]):
    """PostgreSQL's xml, which SQLAlchemy does not name."""

    cache_ok = True

    def get_col_spec(self, **_: Any) -> str:
        return "XML"
