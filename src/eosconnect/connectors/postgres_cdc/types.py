"""PostgreSQL column types -> Kafka Connect schemas and values, as Debezium's PostgreSQL connector maps them.

pgoutput (and the snapshot's text casts) give every value as the type's text output, read here with
the session settings `TimeZone=UTC`, `DateStyle=ISO`, `bytea_output=hex`, `extra_float_digits=3`.

==========================  =====================================================================
PostgreSQL type             Connect schema (Debezium's name)
==========================  =====================================================================
boolean                     BOOLEAN
smallint/integer/bigint     INT16 / INT32 / INT64
real / double precision     FLOAT32 / FLOAT64
numeric(p, s)               `decimal.handling.mode`: precise -> Decimal (scale, connect.decimal.precision),
                            double -> FLOAT64, string -> STRING; numeric without a scale under
                            precise: io.debezium.data.VariableScaleDecimal {scale, value}
text, varchar, char, name   STRING
uuid / json, jsonb          STRING io.debezium.data.Uuid / io.debezium.data.Json
bytea                       BYTES
date                        INT32 io.debezium.time.Date (days since the epoch)
time                        adaptive: io.debezium.time.Time (ms, precision <= 3) / MicroTime (us)
timestamp                   adaptive: io.debezium.time.Timestamp (ms, precision <= 3) / MicroTimestamp (us)
timestamptz                 STRING io.debezium.time.ZonedTimestamp (ISO-8601 in UTC)
anything else               STRING (the value's text)
==========================  =====================================================================

`time.precision.mode=connect` maps date/time/timestamp to Kafka's Date/Time/Timestamp instead.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp

__all__ = ["ColumnType", "DecimalHandling", "TimePrecision", "column_type", "type_default"]

Convert = Callable[[str], Any]

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
EPOCH_DATE = dt.date(1970, 1, 1)

BOOL, BYTEA, NAME, INT8, INT2, INT4, TEXT, JSON = 16, 17, 19, 20, 21, 23, 25, 114
FLOAT4, FLOAT8, BPCHAR, VARCHAR, DATE, TIME = 700, 701, 1042, 1043, 1082, 1083
TIMESTAMP, TIMESTAMPTZ, NUMERIC, UUID, JSONB = 1114, 1184, 1700, 2950, 3802


class DecimalHandling(StrEnum):
    PRECISE = "precise"
    DOUBLE = "double"
    STRING = "string"


class TimePrecision(StrEnum):
    ADAPTIVE = "adaptive"
    ADAPTIVE_TIME_MICROSECONDS = "adaptive_time_microseconds"
    CONNECT = "connect"


@dataclass(frozen=True)
class ColumnType:
    """How one column is represented: its (required) schema builder factory and its text converter."""

    builder: Callable[[], SchemaBuilder]
    convert: Convert


def _debezium(base: Callable[[], SchemaBuilder], name: str) -> Callable[[], SchemaBuilder]:
    return lambda: base().name(name).version(1)


def _bool(text: str) -> bool:
    return text in ("t", "true")


def _bytea(text: str) -> bytes:
    return bytes.fromhex(text[2:]) if text.startswith("\\x") else text.encode()


def _days(text: str) -> int:
    return (dt.date.fromisoformat(text) - EPOCH_DATE).days


def _naive_micros(text: str) -> int:
    value = dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time_micros(text: str) -> int:
    if text.startswith("24:00:00"):
        return 86_400_000_000
    t = dt.time.fromisoformat(text)
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def _zoned(text: str) -> str:
    value = dt.datetime.fromisoformat(text).astimezone(dt.UTC)
    return value.isoformat(timespec="microseconds" if value.microsecond else "seconds").replace("+00:00", "Z")


def _precision(modifier: int, default: int = 6) -> int:
    return default if modifier < 0 else modifier


def _numeric(modifier: int, mode: DecimalHandling) -> ColumnType:
    if mode is DecimalHandling.DOUBLE:
        return ColumnType(SchemaBuilder.float64, lambda t: float(t))
    if mode is DecimalHandling.STRING:
        return ColumnType(SchemaBuilder.string, str)
    if modifier < 4:  # no declared precision/scale: Debezium's VariableScaleDecimal
        schema = (
            SchemaBuilder.struct()
            .name("io.debezium.data.VariableScaleDecimal")
            .version(1)
            .field("scale", SchemaBuilder.int32().build())
            .field("value", SchemaBuilder.bytes().build())
            .build()
        )

        def variable(text: str) -> Struct | None:
            number = decimal.Decimal(text)
            if not number.is_finite():
                return None
            exponent = number.as_tuple().exponent
            scale = -exponent if isinstance(exponent, int) else 0
            unscaled = int(number.scaleb(scale))
            raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
            return Struct(schema).put("scale", scale).put("value", raw)

        def variable_builder() -> SchemaBuilder:
            builder = SchemaBuilder.struct().name(schema.name).version(1)
            for field in schema.fields:
                builder.field(field.name, field.schema)
            return builder

        return ColumnType(variable_builder, variable)
    precision, scale = ((modifier - 4) >> 16) & 0xFFFF, (modifier - 4) & 0xFFFF
    exponent = decimal.Decimal(1).scaleb(-scale)

    def exact(text: str) -> decimal.Decimal | None:
        number = decimal.Decimal(text)
        return number.quantize(exponent) if number.is_finite() else None

    return ColumnType(
        lambda: Decimal.builder(scale).parameter("connect.decimal.precision", str(precision)), exact
    )


def column_type(
    type_oid: int, modifier: int, decimal_mode: DecimalHandling, time_mode: TimePrecision
) -> ColumnType:
    """The Connect representation of a column of type `type_oid` with type modifier `modifier`."""
    connect = time_mode is TimePrecision.CONNECT
    if type_oid == BOOL:
        return ColumnType(SchemaBuilder.bool, _bool)
    if type_oid == INT2:
        return ColumnType(SchemaBuilder.int16, int)
    if type_oid == INT4:
        return ColumnType(SchemaBuilder.int32, int)
    if type_oid == INT8:
        return ColumnType(SchemaBuilder.int64, int)
    if type_oid == FLOAT4:
        return ColumnType(SchemaBuilder.float32, float)
    if type_oid == FLOAT8:
        return ColumnType(SchemaBuilder.float64, float)
    if type_oid == NUMERIC:
        return _numeric(modifier, decimal_mode)
    if type_oid == BYTEA:
        return ColumnType(SchemaBuilder.bytes, _bytea)
    if type_oid == UUID:
        return ColumnType(_debezium(SchemaBuilder.string, "io.debezium.data.Uuid"), str)
    if type_oid in (JSON, JSONB):
        return ColumnType(_debezium(SchemaBuilder.string, "io.debezium.data.Json"), str)
    if type_oid == DATE:
        if connect:
            return ColumnType(Date.builder, dt.date.fromisoformat)
        return ColumnType(_debezium(SchemaBuilder.int32, "io.debezium.time.Date"), _days)
    if type_oid == TIME:
        if connect:
            return ColumnType(Time.builder, dt.time.fromisoformat)
        if time_mode is TimePrecision.ADAPTIVE and _precision(modifier) <= 3:
            return ColumnType(
                _debezium(SchemaBuilder.int32, "io.debezium.time.Time"), lambda t: _time_micros(t) // 1000
            )
        return ColumnType(_debezium(SchemaBuilder.int64, "io.debezium.time.MicroTime"), _time_micros)
    if type_oid == TIMESTAMP:
        if connect:
            return ColumnType(
                Timestamp.builder, lambda t: dt.datetime.fromisoformat(t).replace(tzinfo=dt.UTC)
            )
        if _precision(modifier) <= 3:
            return ColumnType(
                _debezium(SchemaBuilder.int64, "io.debezium.time.Timestamp"),
                lambda t: _naive_micros(t) // 1000,
            )
        return ColumnType(_debezium(SchemaBuilder.int64, "io.debezium.time.MicroTimestamp"), _naive_micros)
    if type_oid == TIMESTAMPTZ:
        return ColumnType(_debezium(SchemaBuilder.string, "io.debezium.time.ZonedTimestamp"), _zoned)
    return ColumnType(SchemaBuilder.string, str)


def type_default(schema: Schema) -> Any:
    """A placeholder for a NOT NULL column whose value an event does not carry (the non-key columns
    of `before` in a delete under REPLICA IDENTITY DEFAULT): zero, empty, false."""
    from eosconnect.api.data import Type

    if schema.name == Decimal.LOGICAL_NAME:
        return decimal.Decimal(0)
    return {
        Type.BOOLEAN: False,
        Type.STRING: "",
        Type.BYTES: b"",
        Type.FLOAT32: 0.0,
        Type.FLOAT64: 0.0,
    }.get(schema.type, 0)
