"""MySQL/MariaDB column types -> Kafka Connect schemas and values, as Debezium's MySQL connector maps them.

A column is described by a `ColumnInfo`, made either from a binlog table map (`binlog_row_metadata=FULL`
gives names, signedness, character sets, ENUM/SET values and the primary key: the table as it was when
the row was written) or from `information_schema.COLUMNS` (the snapshot). Both give the same schema,
and the converters take the Python values both readers produce (mysql-replication's row decoder and
PyMySQL's result rows, read with the session's `time_zone='+00:00'`).

=============================  ==================================================================
MySQL type                     Connect schema (Debezium's name)
=============================  ==================================================================
TINYINT / SMALLINT             INT16 (TINYINT UNSIGNED INT16, SMALLINT UNSIGNED INT32)
MEDIUMINT / INT                INT32 (INT UNSIGNED INT64)
BIGINT                         INT64; BIGINT UNSIGNED per `bigint.unsigned.handling.mode`:
                               long -> INT64, precise -> Decimal(20, 0)
FLOAT / DOUBLE                 FLOAT32 / FLOAT64
DECIMAL(p, s)                  `decimal.handling.mode`: precise -> Decimal (scale,
                               connect.decimal.precision), double -> FLOAT64, string -> STRING
CHAR/VARCHAR/TEXT              STRING
BINARY/VARBINARY/BLOB          `binary.handling.mode`: bytes -> BYTES, base64, base64-url-safe, hex -> STRING
DATE                           INT32 io.debezium.time.Date (days since the epoch)
DATETIME(fsp)                  INT64 io.debezium.time.Timestamp (ms, fsp <= 3) / MicroTimestamp (us)
TIMESTAMP(fsp)                 STRING io.debezium.time.ZonedTimestamp (ISO-8601 in UTC, fsp digits)
TIME(fsp)                      INT64 io.debezium.time.MicroTime (adaptive_time_microseconds);
                               adaptive: io.debezium.time.Time (ms) for fsp <= 3
YEAR                           INT32 io.debezium.time.Year
ENUM / SET                     STRING io.debezium.data.Enum / io.debezium.data.EnumSet (`allowed`)
BIT(1) / BIT(n)                BOOLEAN / BYTES io.debezium.data.Bits (`length`, little-endian bytes)
JSON (MySQL)                   STRING io.debezium.data.Json
GEOMETRY and the rest          BYTES (the value as the server stores it)
=============================  ==================================================================

`time.precision.mode=connect` maps DATE/TIME/DATETIME to Kafka's Date/Time/Timestamp instead.
MariaDB's JSON is LONGTEXT with a CHECK constraint: both the binlog and the catalog call it LONGTEXT,
so it is a STRING here.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eosconnect.api.data import Date, Decimal, SchemaBuilder, Time, Timestamp
from eosconnect.connectors.debezium.modes import DecimalHandling, TimePrecision

__all__ = [
    "BigintUnsignedHandling",
    "BinaryHandling",
    "ColumnInfo",
    "ColumnType",
    "DecimalHandling",
    "TimePrecision",
    "TypeModes",
    "column_type",
]

Convert = Callable[[Any], Any]
EPOCH = dt.datetime(1970, 1, 1)
EPOCH_DATE = dt.date(1970, 1, 1)


class BinaryHandling(StrEnum):
    BYTES = "bytes"
    BASE64 = "base64"
    BASE64_URL_SAFE = "base64-url-safe"
    HEX = "hex"


class BigintUnsignedHandling(StrEnum):
    LONG = "long"
    PRECISE = "precise"


#: The kinds a `ColumnInfo` has: MySQL's type names, the families folded together.
INTEGERS = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 8}
KINDS = frozenset(
    {*INTEGERS, "float", "double", "decimal", "text", "bytes", "date", "datetime", "timestamp", "time"}
    | {"year", "enum", "set", "bit", "json", "geometry"}
)


@dataclass(frozen=True)
class TypeModes:
    """The settings that choose representations."""

    decimal: DecimalHandling = DecimalHandling.PRECISE
    time: TimePrecision = TimePrecision.ADAPTIVE_TIME_MICROSECONDS
    binary: BinaryHandling = BinaryHandling.BYTES
    bigint_unsigned: BigintUnsignedHandling = BigintUnsignedHandling.LONG


@dataclass(frozen=True)
class ColumnInfo:
    """One column as the events need it. `kind` is one of `KINDS`; `precision`/`scale` are a
    DECIMAL's, `fsp` the fractional seconds of a temporal type, `bits` a BIT's width, `values` an
    ENUM's or SET's members in declaration order."""

    name: str
    kind: str
    nullable: bool = True
    unsigned: bool = False
    precision: int = 0
    scale: int = 0
    fsp: int = 0
    bits: int = 0
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown column kind {self.kind!r} of column {self.name!r}")


@dataclass(frozen=True)
class ColumnType:
    """How one column is represented: its (required) schema builder factory and its value converter."""

    builder: Callable[[], SchemaBuilder]
    convert: Convert


def _debezium(base: Callable[[], SchemaBuilder], name: str, **parameters: str) -> Callable[[], SchemaBuilder]:
    def build() -> SchemaBuilder:
        builder = base().name(name).version(1)
        for key, value in parameters.items():
            builder.parameter(key, value)
        return builder

    return build


def _micros(value: dt.datetime) -> int:
    delta = value.replace(tzinfo=None) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time_micros(value: dt.timedelta | dt.time) -> int:
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


def _zoned(fsp: int) -> Convert:
    """Debezium's ZonedTimestamp of a TIMESTAMP (a UTC instant): ISO-8601, the column's fraction digits."""

    def convert(value: dt.datetime) -> str:
        whole = value.replace(tzinfo=None, microsecond=0).isoformat()
        fraction = f".{value.microsecond:06d}"[: fsp + 1] if fsp else ""
        return f"{whole}{fraction}Z"

    return convert


def _binary(mode: BinaryHandling) -> ColumnType:
    if mode is BinaryHandling.BYTES:
        return ColumnType(SchemaBuilder.bytes, bytes)
    encode: Convert = {
        BinaryHandling.BASE64: lambda b: base64.b64encode(b).decode(),
        BinaryHandling.BASE64_URL_SAFE: lambda b: base64.urlsafe_b64encode(b).decode(),
        BinaryHandling.HEX: lambda b: bytes(b).hex(),
    }[mode]
    return ColumnType(SchemaBuilder.string, encode)


def _bits_int(value: Any) -> int:
    """A BIT value as a number: mysql-replication gives the bits as text ('0101', most significant
    first), PyMySQL the big-endian bytes, a consistent-snapshot SELECT of b'..' the same."""
    if isinstance(value, str):
        return int(value, 2) if value else 0
    if isinstance(value, bytes | bytearray):
        return int.from_bytes(value, "big")
    return int(value)


def _set_text(values: tuple[str, ...]) -> Convert:
    """A SET's members, comma-separated in declaration order (as the server writes them)."""

    def convert(value: Any) -> str:
        members = set(value.split(",")) if isinstance(value, str) else set(value)
        members.discard("")
        return ",".join(v for v in values if v in members)

    return convert


def _json_text(value: Any) -> str:
    """MySQL's binary JSON comes decoded (dicts, lists, bytes for strings); the catalog gives text."""
    if isinstance(value, str):
        return value

    def plain(item: Any) -> Any:
        if isinstance(item, bytes):
            return item.decode()
        if isinstance(item, dict):
            return {plain(k): plain(v) for k, v in item.items()}
        if isinstance(item, list):
            return [plain(v) for v in item]
        return item

    return json.dumps(plain(value), separators=(",", ":"), ensure_ascii=False)


def _decimal(info: ColumnInfo, mode: DecimalHandling) -> ColumnType:
    if mode is DecimalHandling.DOUBLE:
        return ColumnType(SchemaBuilder.float64, float)
    if mode is DecimalHandling.STRING:
        return ColumnType(SchemaBuilder.string, lambda v: format(decimal.Decimal(v), "f"))
    exponent = decimal.Decimal(1).scaleb(-info.scale)
    context = decimal.Context(prec=info.precision + 2)
    return ColumnType(
        lambda: Decimal.builder(info.scale).parameter("connect.decimal.precision", str(info.precision)),
        lambda v: decimal.Decimal(v).quantize(exponent, context=context),
    )


def _integer(info: ColumnInfo, modes: TypeModes) -> ColumnType:
    width = INTEGERS[info.kind] + (1 if info.unsigned else 0)  # an unsigned value needs one more byte
    if info.kind == "bigint" and info.unsigned:
        if modes.bigint_unsigned is BigintUnsignedHandling.PRECISE:
            return ColumnType(
                lambda: Decimal.builder(0).parameter("connect.decimal.precision", "20"), decimal.Decimal
            )
        return ColumnType(SchemaBuilder.int64, lambda v: v - (1 << 64) if v >= 1 << 63 else v)
    if width <= 2:
        return ColumnType(SchemaBuilder.int16, int)
    if width <= 4 and not (info.kind == "int" and info.unsigned):
        return ColumnType(SchemaBuilder.int32, int)
    return ColumnType(SchemaBuilder.int64, int)


def column_type(info: ColumnInfo, modes: TypeModes) -> ColumnType:
    """The Connect representation of `info` under the representation settings `modes`."""
    kind, connect = info.kind, modes.time is TimePrecision.CONNECT
    if kind in INTEGERS:
        return _integer(info, modes)
    if kind == "float":
        return ColumnType(SchemaBuilder.float32, float)
    if kind == "double":
        return ColumnType(SchemaBuilder.float64, float)
    if kind == "decimal":
        return _decimal(info, modes.decimal)
    if kind == "text":
        return ColumnType(SchemaBuilder.string, str)
    if kind in ("bytes", "geometry"):
        return _binary(modes.binary)
    if kind == "json":
        return ColumnType(_debezium(SchemaBuilder.string, "io.debezium.data.Json"), _json_text)
    if kind == "year":
        return ColumnType(_debezium(SchemaBuilder.int32, "io.debezium.time.Year"), int)
    if kind == "enum":
        allowed = ",".join(info.values)
        return ColumnType(_debezium(SchemaBuilder.string, "io.debezium.data.Enum", allowed=allowed), str)
    if kind == "set":
        allowed = ",".join(info.values)
        return ColumnType(
            _debezium(SchemaBuilder.string, "io.debezium.data.EnumSet", allowed=allowed),
            _set_text(info.values),
        )
    if kind == "bit":
        if info.bits == 1:
            return ColumnType(SchemaBuilder.bool, lambda v: bool(_bits_int(v)))
        size = (info.bits + 7) // 8
        return ColumnType(
            _debezium(SchemaBuilder.bytes, "io.debezium.data.Bits", length=str(info.bits)),
            lambda v: _bits_int(v).to_bytes(size, "little"),
        )
    if kind == "date":
        if connect:
            return ColumnType(Date.builder, lambda v: v)
        return ColumnType(
            _debezium(SchemaBuilder.int32, "io.debezium.time.Date"), lambda v: (v - EPOCH_DATE).days
        )
    if kind == "time":
        if connect:
            return ColumnType(Time.builder, lambda v: (dt.datetime.min + v).time())
        if modes.time is TimePrecision.ADAPTIVE and info.fsp <= 3:
            return ColumnType(
                _debezium(SchemaBuilder.int32, "io.debezium.time.Time"), lambda v: _time_micros(v) // 1000
            )
        return ColumnType(_debezium(SchemaBuilder.int64, "io.debezium.time.MicroTime"), _time_micros)
    if kind == "datetime":
        if connect:
            return ColumnType(Timestamp.builder, lambda v: v.replace(tzinfo=dt.UTC))
        if info.fsp <= 3:
            return ColumnType(
                _debezium(SchemaBuilder.int64, "io.debezium.time.Timestamp"), lambda v: _micros(v) // 1000
            )
        return ColumnType(_debezium(SchemaBuilder.int64, "io.debezium.time.MicroTimestamp"), _micros)
    # timestamp: an instant, in UTC (the binlog's seconds since the epoch; the snapshot's session zone)
    return ColumnType(_debezium(SchemaBuilder.string, "io.debezium.time.ZonedTimestamp"), _zoned(info.fsp))
