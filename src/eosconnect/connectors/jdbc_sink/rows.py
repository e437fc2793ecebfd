"""A `SinkRecord` as a database row: its table, primary key columns, other columns and their types.

Column types are Connect schemas: the record's own (a `Struct` value, or a primitive key with a
key schema), or, for schemaless JSON maps, a schema inferred from each Python value (int -> INT64,
float -> FLOAT64, str -> STRING, ...). Nested values (maps, arrays, structs) are written as JSON text.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, Type
from eosconnect.api.errors import DataException
from eosconnect.api.records import SinkRecord, TopicPartition
from eosconnect.connectors.jdbc_sink.config import KAFKA_PK_COLUMNS, InsertMode, PkMode, SinkSettings

__all__ = ["Operation", "Row", "RowMaker"]


class Operation(StrEnum):
    INSERT = "insert"
    UPSERT = "upsert"
    UPDATE = "update"
    DELETE = "delete"


@dataclass
class Row:
    """What one record writes: `key` holds the primary key columns, `values` the others."""

    table: str
    operation: Operation
    key: dict[str, Any]
    values: dict[str, Any]
    #: Column name -> its Connect schema (key columns first), for CREATE/ALTER TABLE.
    columns: dict[str, Schema]
    topic_partition: TopicPartition
    offset: int

    @property
    def shape(self) -> tuple[str, Operation, tuple[str, ...], tuple[str, ...]]:
        """Rows of one shape go into one bulk statement."""
        return (self.table, self.operation, tuple(self.key), tuple(self.values))


def _inferred(value: Any) -> Schema:
    """The schema of a schemaless value (always optional: the next record may lack it)."""
    if isinstance(value, bool):
        return SchemaBuilder.bool().optional().build()
    if isinstance(value, int):
        return SchemaBuilder.int64().optional().build()
    if isinstance(value, float):
        return SchemaBuilder.float64().optional().build()
    if isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        return (
            Decimal.builder(-exponent if isinstance(exponent, int) and exponent < 0 else 0).optional().build()
        )
    if isinstance(value, bytes | bytearray):
        return SchemaBuilder.bytes().optional().build()
    if isinstance(value, dt.datetime):
        return Timestamp.builder().optional().build()
    if isinstance(value, dt.date):
        return Date.builder().optional().build()
    if isinstance(value, dt.time):
        return Time.builder().optional().build()
    return SchemaBuilder.string().optional().build()  # str, None, and nested values as JSON text


def _fields(
    value: Any, schema: Schema | None, what: str, record: SinkRecord
) -> dict[str, tuple[Any, Schema]]:
    """Field name -> (value, schema) of a Struct or a schemaless map."""
    if isinstance(value, Struct):
        return {f.name: (value.get(f.name), f.schema) for f in value.schema.fields}
    if isinstance(value, Mapping):
        return {str(k): (v, _inferred(v)) for k, v in value.items()}
    raise DataException(
        f"JdbcSink needs the record {what} as a Struct (a converter with schemas, e.g. JsonConverter with "
        f"schemas.enable=true) or a JSON object, but {record.topic}-{record.partition}@{record.offset} has "
        f"{type(value).__name__}{'' if schema is None else f' (schema {schema.type})'}"
    )


class RowMaker:
    """Turns records into rows per the pk.mode, pk.fields, fields.whitelist and insert.mode settings."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings
        self.operation = {
            InsertMode.INSERT: Operation.INSERT,
            InsertMode.UPSERT: Operation.UPSERT,
            InsertMode.UPDATE: Operation.UPDATE,
        }[settings.insert_mode]

    def row(self, record: SinkRecord) -> Row | None:
        """The row `record` writes, or None for a tombstone that deletes nothing (delete.enabled=false)."""
        s = self.settings
        table = s.table_for(record.topic)
        tp = TopicPartition(record.topic, record.partition)
        key, columns = self._key(record)
        if record.value is None:
            if not s.delete_enabled:
                return None
            return Row(table, Operation.DELETE, key, {}, columns, tp, record.offset)
        fields = _fields(record.value, record.value_schema, "value", record)
        if s.pk_mode is PkMode.RECORD_VALUE:
            names = list(s.pk_fields) or list(fields)
            for name in names:
                if name not in fields:
                    raise DataException(
                        f"pk.fields names {name!r}, but the value of {record.topic}-{record.partition}@"
                        f"{record.offset} has no such field (its fields: {', '.join(fields)})"
                    )
                key[name], columns[name] = fields[name]
        values: dict[str, Any] = {}
        for name, (value, schema) in fields.items():
            if name in key or (s.fields_whitelist and name not in s.fields_whitelist):
                continue
            values[name], columns[name] = value, schema
        return Row(table, self.operation, key, values, columns, tp, record.offset)

    def _key(self, record: SinkRecord) -> tuple[dict[str, Any], dict[str, Schema]]:
        s = self.settings
        if s.pk_mode is PkMode.KAFKA:
            names = s.pk_fields or KAFKA_PK_COLUMNS
            types = (
                SchemaBuilder.string().build(),
                SchemaBuilder.int32().build(),
                SchemaBuilder.int64().build(),
            )
            key = dict(zip(names, (record.topic, record.partition, record.offset), strict=True))
            return key, dict(zip(names, types, strict=True))
        if s.pk_mode is not PkMode.RECORD_KEY:
            return {}, {}
        if record.key is None:
            raise DataException(
                f"pk.mode=record_key, but {record.topic}-{record.partition}@{record.offset} has no key"
            )
        if isinstance(record.key, Struct | Mapping):
            fields = _fields(record.key, record.key_schema, "key", record)
            names = list(s.pk_fields) or list(fields)
            missing = [n for n in names if n not in fields]
            if missing:
                raise DataException(
                    f"pk.fields names {missing}, but the key of {record.topic}-{record.partition}@"
                    f"{record.offset} has only {', '.join(fields)}"
                )
            return {n: fields[n][0] for n in names}, {n: fields[n][1] for n in names}
        if len(s.pk_fields) != 1:
            raise DataException(
                f"the key of {record.topic}-{record.partition}@{record.offset} is a primitive "
                f"({type(record.key).__name__}): set pk.fields to the one column name it is written to"
            )
        name = s.pk_fields[0]
        schema = record.key_schema or _inferred(record.key)
        if schema.type in (Type.STRUCT, Type.MAP, Type.ARRAY):
            raise DataException(f"a {schema.type} key cannot be a primary key column")
        return {name: record.key}, {name: schema}
