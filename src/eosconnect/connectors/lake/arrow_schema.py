"""Connect schemas and schemaless JSON maps to Arrow, with no loss.

A record's schema says more than its type (see `jdbc_sink.semantic`): an INT32 named
`io.debezium.time.Date` is a day and a STRUCT named `io.debezium.data.VariableScaleDecimal` is a
number. Each column's Connect schema becomes an Arrow type and a *converter* turning its values into
what Arrow takes for that type:

====================================  =======================================
schema (name)                         Arrow type
====================================  =======================================
INT8/16/32/64, FLOAT32/64, BOOLEAN    int8/16/32/64, float32/64, bool
STRING, BYTES                         string, binary
Decimal (connect.decimal.precision)   decimal128(precision or 38, scale)
io.debezium.data.VariableScaleDecimal string (the number as written: any scale)
Date, io.debezium.time.Date           date32
Time, Time/MicroTime/NanoTime         time64[us] (`time_type`; string for Delta)
Timestamp                             timestamp[us, UTC]
io.debezium.time.(Micro|Nano)Timest.  timestamp[us] (wall clock, no zone)
io.debezium.time.ZonedTimestamp       timestamp[us, UTC]
io.debezium.time.MicroDuration        int64 (microseconds)
Uuid, Json, Xml, ZonedTime, Interval  string (as written)
ARRAY, MAP, STRUCT                    list, map, struct of the above
====================================  =======================================

Microseconds are the finest unit both table formats keep; NanoTime and NanoTimestamp values are
truncated to them. A schemaless JSON map gives columns by its keys, typed from the first non-null
value (bool, int64, float64, string; nested objects and lists as JSON text).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from eosconnect.api.data import Schema, Struct, Type
from eosconnect.api.data.schema import (
    DATE_LOGICAL_NAME,
    DECIMAL_LOGICAL_NAME,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
)
from eosconnect.api.errors import DataException
from eosconnect.connectors.jdbc_sink.semantic import (
    DEBEZIUM_DATE,
    DEBEZIUM_TIME,
    DEBEZIUM_TIMESTAMP,
    MICRO_DURATION,
    PRECISION_PARAMETER,
    VARIABLE_SCALE_DECIMAL,
    ZONED_TIMESTAMP,
)
from eosconnect.connectors.json_values import json_compatible

__all__ = ["Converter", "Mapper", "inferred_field", "json_text"]

#: A column's values as Arrow takes them for its type.
Converter = Callable[[Any], Any]

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)
UTC_MICROS = pa.timestamp("us", tz="UTC")
_MICROS_PER_DAY = 86_400_000_000

_SIMPLE: dict[Type, pa.DataType] = {
    Type.INT8: pa.int8(),
    Type.INT16: pa.int16(),
    Type.INT32: pa.int32(),
    Type.INT64: pa.int64(),
    Type.FLOAT32: pa.float32(),
    Type.FLOAT64: pa.float64(),
    Type.BOOLEAN: pa.bool_(),
    Type.STRING: pa.string(),
    Type.BYTES: pa.binary(),
}


def _same(value: Any) -> Any:
    return value


def _micros(value: int, per_unit: int) -> int:
    return value * per_unit if per_unit > 0 else value // -per_unit


def _time_of_day(micros: int) -> dt.time:
    micros = min(micros, _MICROS_PER_DAY - 1)  # 24:00:00 (PostgreSQL) as the last microsecond
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return dt.time(hour, minute, second, micro)


def json_text(value: Any) -> str:
    """A nested value (struct, map, list) as JSON text, with bytes as hex and decimals as text."""
    return json.dumps(json_compatible(value), sort_keys=False)


def _variable_decimal(value: Any) -> str:
    if isinstance(value, Struct | dict):
        raw, scale = value.get("value"), value.get("scale")
        assert isinstance(raw, bytes) and scale is not None, "VariableScaleDecimal has value and scale"
        return str(decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-int(scale)))
    return str(value)


def _zoned(value: Any) -> Any:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


class Mapper:
    """Connect schemas to Arrow types and value converters, for one table format.

    `time_type` is what a time of day becomes: Iceberg has a time type, Delta has none (its values
    go as ISO-8601 text there, which sorts and reads back as the same time)."""

    def __init__(self, time_type: pa.DataType | None = None) -> None:
        self.time_type = pa.time64("us") if time_type is None else time_type

    def _time(self, to_time: Callable[[Any], dt.time]) -> Converter:
        if pa.types.is_string(self.time_type):
            return lambda value: to_time(value).isoformat()
        return to_time

    def field(self, name: str, schema: Schema) -> tuple[pa.Field, Converter]:
        arrow_type, convert = self.column(schema)
        return pa.field(name, arrow_type, nullable=True), convert

    def column(self, schema: Schema) -> tuple[pa.DataType, Converter]:
        """The Arrow type of values of this schema, and how a value becomes one."""
        name = schema.name
        parameters = schema.parameters or {}
        if name == DECIMAL_LOGICAL_NAME:
            scale = int(parameters.get("scale", "0"))
            precision = int(parameters.get(PRECISION_PARAMETER, "38"))
            return pa.decimal128(max(precision, scale, 1), scale), _same
        if name == VARIABLE_SCALE_DECIMAL:
            return pa.string(), _variable_decimal
        if name == DATE_LOGICAL_NAME:
            return pa.date32(), _same
        if name == DEBEZIUM_DATE:
            return pa.date32(), lambda v: EPOCH_DATE + dt.timedelta(days=int(v))
        if name == TIME_LOGICAL_NAME:
            return self.time_type, self._time(lambda v: v.replace(tzinfo=None))
        if name in DEBEZIUM_TIME:
            per_unit = DEBEZIUM_TIME[name]
            return self.time_type, self._time(lambda v: _time_of_day(_micros(int(v), per_unit)))
        if name == TIMESTAMP_LOGICAL_NAME:
            return UTC_MICROS, _same
        if name in DEBEZIUM_TIMESTAMP:
            per_unit = DEBEZIUM_TIMESTAMP[name]
            return pa.timestamp("us"), lambda v: EPOCH + dt.timedelta(microseconds=_micros(int(v), per_unit))
        if name == ZONED_TIMESTAMP:
            return UTC_MICROS, _zoned
        if name == MICRO_DURATION:
            return pa.int64(), int
        if schema.type in _SIMPLE:
            return _SIMPLE[schema.type], _same
        if schema.type is Type.ARRAY:
            assert schema.value_schema is not None
            element, convert = self.column(schema.value_schema)
            return pa.list_(element), lambda v: [None if e is None else convert(e) for e in v]
        if schema.type is Type.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            key_type, convert_key = self.column(schema.key_schema)
            value_type, convert_value = self.column(schema.value_schema)
            return pa.map_(key_type, value_type), lambda v: [
                (convert_key(k), None if x is None else convert_value(x)) for k, x in v.items()
            ]
        if schema.type is Type.STRUCT:
            fields = [(f.name, *self.column(f.schema)) for f in schema.fields]
            arrow = pa.struct([pa.field(n, t, nullable=True) for n, t, _ in fields])

            def convert_struct(v: Any) -> dict[str, Any]:
                get = v.get
                return {n: None if (x := get(n)) is None else c(x) for n, _, c in fields}

            return arrow, convert_struct
        raise DataException(f"schema type {schema.type} has no table column type")


def inferred_field(name: str, value: Any) -> tuple[pa.Field, Converter] | None:
    """The column a schemaless map's value gives (None for a null: typed by a later value)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return pa.field(name, pa.bool_()), _same
    if isinstance(value, int):
        return pa.field(name, pa.int64()), _same
    if isinstance(value, float):
        return pa.field(name, pa.float64()), _same
    if isinstance(value, decimal.Decimal):
        return pa.field(name, pa.string()), str
    if isinstance(value, bytes):
        return pa.field(name, pa.binary()), _same
    if isinstance(value, str):
        return pa.field(name, pa.string()), _same
    return pa.field(name, pa.string()), _as_text


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)
