"""Table columns -> Kafka Connect schemas and values, as Confluent's JDBC source connector maps them.

Each table gets one STRUCT schema named after the table, a field per column (optional where the
column is nullable), so a topic filled by `JdbcSource` carries the table's types to any schema-aware
sink (with `JsonConverter`, `schemas.enable=true` by default, or a Schema Registry converter):

==============================  ==============================================================
Column type (SQLAlchemy)        Connect schema
==============================  ==============================================================
BOOLEAN                         BOOLEAN
SMALLINT / INTEGER / BIGINT     INT16 / INT32 / INT64 (SQLite's INTEGER: INT64, it is 8 bytes)
REAL / FLOAT, DOUBLE            FLOAT32 / FLOAT64 (SQLite's REAL: FLOAT64, it is 8 bytes)
NUMERIC(p, s), DECIMAL          by `numeric.mapping`, below
CHAR, VARCHAR, TEXT, ENUM       STRING
BINARY, VARBINARY, BLOB, BYTEA  BYTES
DATE / TIME / TIMESTAMP         logical Date / Time / Timestamp
INTERVAL                        FLOAT64 (seconds)
anything else (JSON, UUID...)   STRING (its text; JSON as JSON text)
==============================  ==============================================================

`numeric.mapping`, Confluent's setting: `none` (the default) maps every NUMERIC to the logical
`Decimal` with the column's scale; `precision_only` maps NUMERIC(p, 0) with p <= 18 to the smallest
integer type that holds p digits (INT8 for p < 3, INT16 < 5, INT32 < 10, else INT64); `best_fit`
does the same and maps NUMERIC(p, s>0) with p <= 18 to FLOAT64; `best_fit_eager_double` maps every
NUMERIC(p, s>0) to FLOAT64, whatever its precision. A NUMERIC without a declared scale has no fixed
scale for `Decimal`: it maps to FLOAT64 under the two `best_fit` mappings and to STRING (its exact
text) otherwise. Timestamps without a time zone are read in `db.timezone`.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eosconnect.api.data import (
    Date,
    Decimal,
    Schema,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
    Type,
)
from eosconnect.api.errors import DataException

__all__ = ["DriverRows", "NumericMapping", "RowSchema", "UnconvertibleValue", "key_schema_for", "row_schema"]

ValueConverter = Callable[[Any], Any]

_WIDE = decimal.Context(prec=1000)


class NumericMapping(StrEnum):
    NONE = "none"
    PRECISION_ONLY = "precision_only"
    BEST_FIT = "best_fit"
    BEST_FIT_EAGER_DOUBLE = "best_fit_eager_double"


class UnconvertibleValue(DataException):
    """A column value that its column's Connect type cannot hold (SQLite keeps any value in any
    column; a type changed under a running task): the message names the table, the column, the
    value's type and the fix."""

    def __init__(self, table: str, column: str, declared: str, target: Schema, value: Any, why: Exception):
        self.column = column
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        super().__init__(
            f"column {column!r} of table {table!r} holds a {type(value).__name__} value ({shown}) that its "
            f"declared type {declared} (Connect {target.type}) cannot hold: {why}. Store values of the "
            "declared type in the column, or change the column to a type that holds them (JdbcSource "
            "follows a changed column type from its next poll)."
        )


@dataclass(frozen=True)
class DriverRows:
    """Rows as a driver returns them: its SQLAlchemy `dialect`, and the type code the cursor
    description gives each column (some result processors depend on it, PostgreSQL's numerics)."""

    dialect: Any
    type_codes: Mapping[str, Any]

    def processed(self, column: Any, convert: ValueConverter) -> ValueConverter:
        """`convert` after the column type's SQLAlchemy result processing (if it has one)."""
        dialect = self.dialect
        process = column.type.dialect_impl(dialect).result_processor(
            dialect, self.type_codes.get(column.name)
        )
        if process is None:
            return convert
        return lambda value: None if (v := process(value)) is None else convert(v)


@dataclass(frozen=True)
class RowSchema:
    """A table's STRUCT schema and, per field, how a driver value becomes its Connect value."""

    schema: Schema
    converters: tuple[tuple[str, ValueConverter], ...]
    #: Per field, the column's declared type as the database names it (for error messages).
    declared: tuple[str, ...] = ()

    def struct(self, row: Mapping[str, Any]) -> Struct:
        """The row as a Struct of this schema (values converted to their schema's Python types);
        `UnconvertibleValue` for a value its field cannot hold."""
        values = []
        for index, (name, convert) in enumerate(self.converters):
            value = row[name]
            if value is not None:
                try:
                    value = convert(value)
                except (ValueError, TypeError, ArithmeticError) as exc:
                    declared = self.declared[index] if self.declared else "?"
                    table = self.schema.name or "?"
                    raise UnconvertibleValue(
                        table, name, declared, self.field_schema(name), value, exc
                    ) from None
            values.append(value)
        return Struct.from_values(self.schema, values, validate=False)

    def field_schema(self, name: str) -> Schema:
        field = self.schema.field(name)
        assert field is not None, name
        return field.schema


def row_schema(
    name: str,
    columns: list[Any],
    *,
    dialect: str,
    numeric_mapping: NumericMapping,
    zone: dt.tzinfo,
    text_columns: frozenset[str] = frozenset(),
    driver_rows: DriverRows | None = None,
) -> RowSchema:
    """The schema of rows selected as `columns` (SQLAlchemy columns) of table `name`.

    `text_columns` are read as text whatever their declared type (SQLite timestamps compared as text).
    With `driver_rows`, rows come as the driver returns them (a `SELECT *`, which SQLAlchemy cannot
    type), so each column's SQLAlchemy result processing runs first, as it would for a selected
    column: the values are those of a typed select.
    """
    builder = SchemaBuilder.struct().name(name)
    converters = []
    for column in columns:
        convert: Callable[[Any], Any]
        if column.name in text_columns:
            field_builder, convert = SchemaBuilder.string(), str
        else:
            field_builder, convert = _column(column.type, dialect, numeric_mapping, zone)
            if driver_rows is not None:
                convert = driver_rows.processed(column, convert)
        if column.nullable:
            field_builder.optional()
        builder.field(column.name, field_builder)
        converters.append((column.name, convert))
    return RowSchema(builder.build(), tuple(converters), tuple(str(c.type) for c in columns))


def _column(
    column_type: Any, dialect: str, numeric_mapping: NumericMapping, zone: dt.tzinfo
) -> tuple[SchemaBuilder, ValueConverter]:
    from sqlalchemy import types as t

    sqlite = dialect == "sqlite"
    if isinstance(column_type, t.Boolean):
        return SchemaBuilder.bool(), bool
    if isinstance(column_type, t.Integer):
        if sqlite or isinstance(column_type, t.BigInteger):
            return SchemaBuilder.int64(), int
        if isinstance(column_type, t.SmallInteger):
            return SchemaBuilder.int16(), int
        return SchemaBuilder.int32(), int
    if isinstance(column_type, t.Float):  # before Numeric: Float is a Numeric
        single = isinstance(column_type, t.REAL) or (
            column_type.precision is not None and column_type.precision <= 24
        )
        return (SchemaBuilder.float32() if single and not sqlite else SchemaBuilder.float64()), float
    if isinstance(column_type, t.Numeric):
        return _numeric(column_type.precision, column_type.scale, numeric_mapping)
    if isinstance(column_type, t.DateTime):
        return Timestamp.builder(), lambda v: _instant(v, zone)
    if isinstance(column_type, t.Date):
        return Date.builder(), _date
    if isinstance(column_type, t.Time):
        return Time.builder(), _time
    if isinstance(column_type, t.Interval):
        return (
            SchemaBuilder.float64(),
            lambda v: v.total_seconds() if isinstance(v, dt.timedelta) else float(v),
        )
    if isinstance(column_type, t._Binary):
        return SchemaBuilder.bytes(), bytes
    if isinstance(column_type, t.String | t.Enum):
        return SchemaBuilder.string(), str
    return SchemaBuilder.string(), _text


def _numeric(
    precision: int | None, scale: int | None, mapping: NumericMapping
) -> tuple[SchemaBuilder, ValueConverter]:
    fits = precision is not None and 0 < precision <= 18
    if mapping is not NumericMapping.NONE and fits and not scale:
        assert precision is not None
        if precision < 3:
            return SchemaBuilder.int8(), int
        if precision < 5:
            return SchemaBuilder.int16(), int
        if precision < 10:
            return SchemaBuilder.int32(), int
        return SchemaBuilder.int64(), int
    doubles = mapping is NumericMapping.BEST_FIT_EAGER_DOUBLE or (mapping is NumericMapping.BEST_FIT and fits)
    if scale is not None and scale > 0 and doubles:
        return SchemaBuilder.float64(), float
    if scale is None:
        if mapping in (NumericMapping.BEST_FIT, NumericMapping.BEST_FIT_EAGER_DOUBLE):
            return SchemaBuilder.float64(), float
        return SchemaBuilder.string(), _decimal_text
    exponent = decimal.Decimal(1).scaleb(-scale)

    def to_decimal(value: Any) -> decimal.Decimal:
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        return _WIDE.quantize(number, exponent)

    return Decimal.builder(scale), to_decimal


def _instant(value: Any, zone: dt.tzinfo) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if not isinstance(value, dt.datetime):  # a DATE in a DATETIME column (SQLite lets that happen)
        value = dt.datetime.combine(value, dt.time())
    return value.replace(tzinfo=zone) if value.tzinfo is None else value


def _date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, str):
        return dt.date.fromisoformat(value)
    return value


def _time(value: Any) -> dt.time:
    if isinstance(value, str):
        return dt.time.fromisoformat(value)
    if isinstance(value, dt.timedelta):  # some drivers (MySQL) return TIME as a duration
        return (dt.datetime.min + value).time()
    return value


def _decimal_text(value: Any) -> str:
    return str(value)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, separators=(",", ":"), default=str)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def key_schema_for(field_schema: Schema) -> Schema | None:
    """The schema of a record key holding the incrementing column (an integer), or None (schemaless)
    when the column is not an integer type."""
    if field_schema.type in (Type.INT8, Type.INT16, Type.INT32, Type.INT64) and field_schema.name is None:
        return SchemaBuilder(field_schema.type).build()
    return None
