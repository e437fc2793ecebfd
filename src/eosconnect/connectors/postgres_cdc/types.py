"""PostgreSQL column types -> Kafka Connect schemas and values, as Debezium's PostgreSQL connector maps them.

pgoutput (and the snapshot's text casts) give every value as the type's text output, read here with
the session settings `TimeZone=UTC`, `DateStyle=ISO`, `IntervalStyle=postgres`, `bytea_output=hex`,
`extra_float_digits=3`.

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
timestamptz                 STRING io.debezium.time.ZonedTimestamp (ISO-8601 in UTC, the column's
                            fractional digits: 6 unless declared)
interval                    `interval.handling.mode`: numeric -> INT64 io.debezium.time.MicroDuration (a
                            month counted as 365.25/12 days), string -> STRING io.debezium.time.Interval
                            (ISO-8601 `P1Y2M3DT4H5M6.78S`, exact)
hstore (extension)          STRING io.debezium.data.Json ({"key":"value"} in Java HashMap order)
<type>[] (one dimension)    ARRAY of the element type's schema, optional elements
anything else               STRING (the value's text)
==========================  =====================================================================

Every row of this table is held to the events of real Debezium by a differential test (docs/cdc.md).
`time.precision.mode=connect` maps date/time/timestamp to Kafka's Date/Time/Timestamp instead.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp
from eosconnect.connectors.debezium.modes import DecimalHandling, TimePrecision

__all__ = [
    "ColumnType",
    "DecimalHandling",
    "IntervalHandling",
    "TimePrecision",
    "column_type",
    "type_default",
]

Convert = Callable[[str], Any]

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
EPOCH_DATE = dt.date(1970, 1, 1)

BOOL, BYTEA, NAME, INT8, INT2, INT4, TEXT, JSON = 16, 17, 19, 20, 21, 23, 25, 114
FLOAT4, FLOAT8, BPCHAR, VARCHAR, DATE, TIME = 700, 701, 1042, 1043, 1082, 1083
TIMESTAMP, TIMESTAMPTZ, NUMERIC, UUID, JSONB = 1114, 1184, 1700, 2950, 3802
INTERVAL = 1186
#: Built-in array types -> their element types (pg_type.typelem).
ARRAY_ELEMENTS = {
    1000: BOOL, 1001: BYTEA, 1003: NAME, 1005: INT2, 1007: INT4, 1009: TEXT, 1014: BPCHAR,
    1015: VARCHAR, 1016: INT8, 1021: FLOAT4, 1022: FLOAT8, 1115: TIMESTAMP, 1182: DATE, 1183: TIME,
    1185: TIMESTAMPTZ, 1187: INTERVAL, 1231: NUMERIC, 199: JSON, 2951: UUID, 3807: JSONB,
}  # fmt: skip
#: Arithmetic that never rounds a numeric: PostgreSQL's hold up to 131,072 digits before the point
#: and 16,383 after (the default context keeps 28 and would round the rest away).
_EXACT = decimal.Context(prec=150_000)
#: Debezium's MicroDuration.DAYS_PER_MONTH_AVG.
DAYS_PER_MONTH = 365.25 / 12.0


class IntervalHandling(StrEnum):
    """Debezium's `interval.handling.mode`: numeric is lossy for months (a month is an average
    length of time there), string keeps every component."""

    NUMERIC = "numeric"
    STRING = "string"


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


def _zoned(digits: int) -> Convert:
    """Debezium's ZonedTimestamp: ISO-8601 in UTC with the column's number of fractional digits."""

    def convert(text: str) -> str:
        if text.endswith("+00") and text[4:5] == "-" and text[10:11] == " " and text[19:20] in (".", "+"):
            # Already UTC (the session's TimeZone) with a four-digit year: re-punctuated, not parsed.
            fraction = text[20:-3].ljust(6, "0")[:digits] if text[19] == "." else "0" * digits
            return text[:10] + "T" + text[11:19] + (f".{fraction}" if digits else "") + "Z"
        value = dt.datetime.fromisoformat(text).astimezone(dt.UTC)
        fraction = f"{value.microsecond:06d}"[:digits]
        # isoformat, not strftime: a year before 1000 keeps its four digits, as Java's formatter writes it
        whole = value.replace(tzinfo=None, microsecond=0).isoformat()
        return whole + (f".{fraction}" if digits else "") + "Z"

    return convert


_INTERVAL_PART = re.compile(r"([+-]?\d+) (year|mon|day)s?")
_INTERVAL_TIME = re.compile(r"([+-])?(\d+):(\d+):(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class _Interval:
    """An interval's components as PostgreSQL's default output style writes them
    (`1 year 2 mons -3 days +04:05:06.789`); the time part's sign is on each of its components."""

    years: int
    months: int
    days: int
    hours: int
    minutes: int
    seconds: int
    micros: int

    @classmethod
    def parse(cls, text: str) -> _Interval:
        units = {"year": 0, "mon": 0, "day": 0}
        for number, unit in _INTERVAL_PART.findall(text):
            units[unit] = int(number)
        hours = minutes = seconds = micros = 0
        if clock := _INTERVAL_TIME.search(text):
            sign = -1 if clock.group(1) == "-" else 1
            hours, minutes, seconds = (sign * int(clock.group(i)) for i in (2, 3, 4))
            micros = sign * int((clock.group(5) or "0").ljust(6, "0")[:6])
        return cls(units["year"], units["mon"], units["day"], hours, minutes, seconds, micros)


def _interval_micros(text: str) -> int:
    """Debezium's MicroDuration: the same double arithmetic as its MicroDuration.durationMicros
    (whole seconds, then the microseconds), a month being 365.25/12 days."""
    i = _Interval.parse(text)
    days = (i.years * 12 + i.months) * DAYS_PER_MONTH + i.days
    return int(((((days * 24 + i.hours) * 60) + i.minutes) * 60 + i.seconds) * 1e6 + i.micros)


def _interval_iso(text: str) -> str:
    """Debezium's io.debezium.time.Interval: `P<y>Y<m>M<d>DT<h>H<m>M<s>S`, every component present
    and the seconds without trailing zeros (Java's stripTrailingZeros().toPlainString())."""
    i = _Interval.parse(text)
    seconds = decimal.Decimal(i.seconds) + decimal.Decimal(i.micros).scaleb(-6)
    plain = f"{seconds.normalize():f}" if seconds else "0"
    return f"P{i.years}Y{i.months}M{i.days}DT{i.hours}H{i.minutes}M{plain}S"


_HSTORE_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)"\s*=>\s*(NULL|"((?:[^"\\]|\\.)*)")')


def _java_hash(text: str) -> int:
    """java.lang.String.hashCode, spread as java.util.HashMap does."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _hstore_json(text: str) -> str:
    """hstore's text as Debezium's JSON (`hstore.handling.mode=json`): Debezium reads it into a
    java.util.HashMap and writes its entries in that map's iteration order, which this reproduces:
    by bucket (spread hash & (capacity - 1)), then insertion order; capacity 16, doubled past 3/4 full."""
    entries: dict[str, str | None] = {}
    for key, raw, quoted in _HSTORE_ITEM.findall(text):
        value = None if raw == "NULL" else re.sub(r"\\(.)", r"\1", quoted)
        entries[re.sub(r"\\(.)", r"\1", key)] = value
    capacity = 16
    while len(entries) > capacity * 3 // 4:
        capacity *= 2
    ordered = sorted(entries, key=lambda k: _java_hash(k) & (capacity - 1))
    return json.dumps({k: entries[k] for k in ordered}, ensure_ascii=False, separators=(",", ":"))


_ARRAY_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)"|([^,{}]+)')


def _array(element: Convert) -> Convert:
    """A one-dimensional array's text (`{1,NULL,"a,b"}`) as a list of converted elements."""

    def convert(text: str) -> list[Any]:
        inner = text[text.index("{") + 1 : text.rindex("}")]
        out: list[Any] = []
        for quoted, bare in _ARRAY_ITEM.findall(inner):
            if bare:
                bare = bare.strip()
                out.append(None if bare == "NULL" else element(bare))
            else:
                out.append(element(re.sub(r"\\(.)", r"\1", quoted)))
        return out

    return convert


def _precision(modifier: int, default: int = 6) -> int:
    return default if modifier < 0 else modifier


def _strip_zeros(number: decimal.Decimal) -> decimal.Decimal:
    """Java's BigDecimal.stripTrailingZeros for a number Debezium reads without a declared scale,
    except that an integer keeps scale 0."""
    if number == number.to_integral_value():
        return number.quantize(decimal.Decimal(1), context=_EXACT)
    return number.normalize(_EXACT)


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
            .doc("Variable scaled decimal")
            .field("scale", SchemaBuilder.int32().build())
            .field("value", SchemaBuilder.bytes().build())
            .build()
        )

        def variable(text: str) -> Struct | None:
            number = decimal.Decimal(text)
            if not number.is_finite():
                return None
            number = _strip_zeros(number)
            exponent = number.as_tuple().exponent
            scale = -exponent if isinstance(exponent, int) else 0
            unscaled = int(number.scaleb(scale, _EXACT))
            raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
            return Struct(schema).put("scale", scale).put("value", raw)

        def variable_builder() -> SchemaBuilder:
            builder = SchemaBuilder.struct().name(schema.name).version(1).doc(schema.doc)
            for field in schema.fields:
                builder.field(field.name, field.schema)
            return builder

        return ColumnType(variable_builder, variable)
    precision, scale = ((modifier - 4) >> 16) & 0xFFFF, (modifier - 4) & 0xFFFF
    exponent = decimal.Decimal(1).scaleb(-scale)

    def exact(text: str) -> decimal.Decimal | None:
        number = decimal.Decimal(text)
        return number.quantize(exponent, context=_EXACT) if number.is_finite() else None

    return ColumnType(
        lambda: Decimal.builder(scale).parameter("connect.decimal.precision", str(precision)), exact
    )


def column_type(
    type_oid: int,
    modifier: int,
    decimal_mode: DecimalHandling,
    time_mode: TimePrecision,
    type_name: str | None = None,
    interval_mode: IntervalHandling = IntervalHandling.NUMERIC,
) -> ColumnType:
    """The Connect representation of a column of type `type_oid` with type modifier `modifier`;
    `type_name` names a type an extension defines (its oid differs per database): hstore."""
    if type_oid in ARRAY_ELEMENTS:
        element = column_type(
            ARRAY_ELEMENTS[type_oid], modifier, decimal_mode, time_mode, interval_mode=interval_mode
        )
        return ColumnType(
            lambda: SchemaBuilder.array(element.builder().optional().build()), _array(element.convert)
        )
    if type_name == "hstore":
        return ColumnType(_debezium(SchemaBuilder.string, "io.debezium.data.Json"), _hstore_json)
    if type_oid == INTERVAL and interval_mode is IntervalHandling.STRING:
        return ColumnType(_debezium(SchemaBuilder.string, "io.debezium.time.Interval"), _interval_iso)
    if type_oid == INTERVAL:
        return ColumnType(_debezium(SchemaBuilder.int64, "io.debezium.time.MicroDuration"), _interval_micros)
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
        return ColumnType(
            _debezium(SchemaBuilder.string, "io.debezium.time.ZonedTimestamp"), _zoned(_precision(modifier))
        )
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
