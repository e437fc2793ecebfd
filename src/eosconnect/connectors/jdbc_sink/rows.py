"""A `SinkRecord` as a database row: its table, primary key columns, other columns and their types.

Column types are Connect schemas: the record's own (a `Struct` value, or a primitive key with a
key schema), or, for schemaless JSON maps, a schema inferred from each Python value (int -> INT64,
float -> FLOAT64, str -> STRING, ...). Nested values (maps, arrays, structs) are written as JSON text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
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


@functools.cache
def _inferred_schema(kind: type, scale: int = 0) -> Schema:
    """One schema object per inferred kind, so that rows of schemaless values share them."""
    if kind is bool:
        return SchemaBuilder.bool().optional().build()
    if kind is int:
        return SchemaBuilder.int64().optional().build()
    if kind is float:
        return SchemaBuilder.float64().optional().build()
    if kind is decimal.Decimal:
        return Decimal.builder(scale).optional().build()
    if kind is bytes:
        return SchemaBuilder.bytes().optional().build()
    if kind is dt.datetime:
        return Timestamp.builder().optional().build()
    if kind is dt.date:
        return Date.builder().optional().build()
    if kind is dt.time:
        return Time.builder().optional().build()
    return SchemaBuilder.string().optional().build()  # str, None, and nested values as JSON text


def _inferred(value: Any) -> Schema:
    """The schema of a schemaless value (always optional: the next record may lack it)."""
    if isinstance(value, bool):
        return _inferred_schema(bool)
    if isinstance(value, int):
        return _inferred_schema(int)
    if isinstance(value, float):
        return _inferred_schema(float)
    if isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        return _inferred_schema(
            decimal.Decimal, -exponent if isinstance(exponent, int) and exponent < 0 else 0
        )
    if isinstance(value, bytes | bytearray):
        return _inferred_schema(bytes)
    if isinstance(value, dt.datetime):
        return _inferred_schema(dt.datetime)
    if isinstance(value, dt.date):
        return _inferred_schema(dt.date)
    if isinstance(value, dt.time):
        return _inferred_schema(dt.time)
    return _inferred_schema(str)


@dataclass(frozen=True)
class _StructFields:
    """A Struct schema's fields as columns, worked out once per schema (not once per record)."""

    names: tuple[str, ...]
    schemas: dict[str, Schema]
    #: Each field's default value (what `Struct.get` returns for an empty slot); None if none has one.
    defaults: tuple[Any, ...] | None

    @classmethod
    def of(cls, schema: Schema) -> _StructFields:
        defaults = tuple(f.schema.default_value for f in schema.fields)
        return cls(
            tuple(f.name for f in schema.fields),
            {f.name: f.schema for f in schema.fields},
            defaults if any(d is not None for d in defaults) else None,
        )

    def values(self, struct: Struct) -> dict[str, Any]:
        """Field name -> value, as `struct.get` reads them."""
        values = struct._values
        if self.defaults is not None:
            values = [d if v is None else v for v, d in zip(values, self.defaults, strict=True)]
        return dict(zip(self.names, values, strict=True))


@dataclass(frozen=True)
class _Layout:
    """For values of one schema with key columns of one kind: the non-key columns, and all columns
    with their schemas (key columns first), shared by every row of that kind."""

    value_names: tuple[str, ...]
    columns: dict[str, Schema]


#: Caches of per-schema work are emptied when they reach this many entries (schemas come and go).
_CACHE_LIMIT = 1000


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
    """Turns records into rows per the pk.mode, pk.fields, fields.whitelist and insert.mode settings.

    What depends only on a Struct's schema (field names, column types, which fields are key
    columns) is worked out once per schema and shared by its rows."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings
        self.operation = {
            InsertMode.INSERT: Operation.INSERT,
            InsertMode.UPSERT: Operation.UPSERT,
            InsertMode.UPDATE: Operation.UPDATE,
        }[settings.insert_mode]
        self._structs: dict[Schema, _StructFields] = {}
        self._layouts: dict[tuple[Any, ...], _Layout] = {}
        self._partitions: dict[tuple[str, int], tuple[str, TopicPartition]] = {}
        #: pk.mode=kafka: the key columns' schemas (pk.fields names three, or Kafka's default names).
        self._kafka_columns: dict[str, Schema] = {}
        if settings.pk_mode is PkMode.KAFKA:
            types = (
                SchemaBuilder.string().build(),
                SchemaBuilder.int32().build(),
                SchemaBuilder.int64().build(),
            )
            self._kafka_columns = dict(zip(settings.pk_fields or KAFKA_PK_COLUMNS, types, strict=True))

    def _struct_fields(self, schema: Schema) -> _StructFields:
        found = self._structs.get(schema)
        if found is None:
            if len(self._structs) >= _CACHE_LIMIT:
                self._structs.clear()
            found = self._structs[schema] = _StructFields.of(schema)
        return found

    def row(self, record: SinkRecord) -> Row | None:
        """The row `record` writes, or None for a tombstone that deletes nothing (delete.enabled=false)."""
        s = self.settings
        place = self._partitions.get((record.topic, record.partition))
        if place is None:
            if len(self._partitions) >= _CACHE_LIMIT:
                self._partitions.clear()
            place = (s.table_for(record.topic), TopicPartition(record.topic, record.partition))
            self._partitions[(record.topic, record.partition)] = place
        table, tp = place
        key, key_columns, key_token = self._key(record)
        value = record.value
        if value is None:
            if not s.delete_enabled:
                return None
            return Row(table, Operation.DELETE, key, {}, dict(key_columns), tp, record.offset)
        if isinstance(value, Struct):
            struct = self._struct_fields(value.schema)
            fields, schemas = struct.values(value), struct.schemas
            layout_key: tuple[Any, ...] | None = (value.schema, key_token) if key_token is not None else None
        else:
            pairs = _fields(value, record.value_schema, "value", record)
            fields = {name: v for name, (v, _) in pairs.items()}
            schemas = {name: schema for name, (_, schema) in pairs.items()}
            layout_key = None
        if s.pk_mode is PkMode.RECORD_VALUE:
            names = list(s.pk_fields) or list(fields)
            for name in names:
                if name not in fields:
                    raise DataException(
                        f"pk.fields names {name!r}, but the value of {record.topic}-{record.partition}@"
                        f"{record.offset} has no such field (its fields: {', '.join(fields)})"
                    )
                key[name] = fields[name]
            key_columns = {name: schemas[name] for name in names}
        layout = None if layout_key is None else self._layouts.get(layout_key)
        if layout is None:
            value_names = tuple(
                name
                for name in fields
                if name not in key and (not s.fields_whitelist or name in s.fields_whitelist)
            )
            layout = _Layout(value_names, {**key_columns, **{n: schemas[n] for n in value_names}})
            if layout_key is not None:
                if len(self._layouts) >= _CACHE_LIMIT:
                    self._layouts.clear()
                self._layouts[layout_key] = layout
        values = {name: fields[name] for name in layout.value_names}
        return Row(table, self.operation, key, values, layout.columns, tp, record.offset)

    def _key(self, record: SinkRecord) -> tuple[dict[str, Any], dict[str, Schema], Any]:
        """The key columns' values and schemas, and a token naming those schemas for the layout
        cache (the same token: the same key columns; None: not cacheable)."""
        s = self.settings
        if s.pk_mode is PkMode.KAFKA:
            key = dict(zip(self._kafka_columns, (record.topic, record.partition, record.offset), strict=True))
            return key, self._kafka_columns, ()
        if s.pk_mode is not PkMode.RECORD_KEY:
            return {}, {}, ()  # none, or record_value (the value's schema decides)
        if record.key is None:
            raise DataException(
                f"pk.mode=record_key, but {record.topic}-{record.partition}@{record.offset} has no key"
            )
        if isinstance(record.key, Struct):
            struct = self._struct_fields(record.key.schema)
            names = s.pk_fields or struct.names
            missing = [n for n in names if n not in struct.schemas]
            if missing:
                raise DataException(
                    f"pk.fields names {missing}, but the key of {record.topic}-{record.partition}@"
                    f"{record.offset} has only {', '.join(struct.names)}"
                )
            values = struct.values(record.key)
            return (
                {n: values[n] for n in names},
                {n: struct.schemas[n] for n in names},
                record.key.schema,
            )
        if isinstance(record.key, Mapping):
            fields = _fields(record.key, record.key_schema, "key", record)
            names = tuple(s.pk_fields) or tuple(fields)
            missing = [n for n in names if n not in fields]
            if missing:
                raise DataException(
                    f"pk.fields names {missing}, but the key of {record.topic}-{record.partition}@"
                    f"{record.offset} has only {', '.join(fields)}"
                )
            return {n: fields[n][0] for n in names}, {n: fields[n][1] for n in names}, None
        if len(s.pk_fields) != 1:
            raise DataException(
                f"the key of {record.topic}-{record.partition}@{record.offset} is a primitive "
                f"({type(record.key).__name__}): set pk.fields to the one column name it is written to"
            )
        name = s.pk_fields[0]
        schema = record.key_schema or _inferred(record.key)
        if schema.type in (Type.STRUCT, Type.MAP, Type.ARRAY):
            raise DataException(f"a {schema.type} key cannot be a primary key column")
        return {name: record.key}, {name: schema}, schema
