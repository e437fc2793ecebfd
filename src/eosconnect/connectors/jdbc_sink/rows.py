"""A `SinkRecord` as a database row: its table, primary key columns, other columns and their types.

Column types are Connect schemas: the record's own (a `Struct` value, or a primitive key with a
key schema), or, for schemaless JSON maps, a schema inferred from each Python value (int -> INT64,
float -> FLOAT64, str -> STRING, ...). Each column's schema also says how its values are written
(`semantic.writer`: a Debezium date as a day, a VariableScaleDecimal as a number, ...); schemaless
nested values (maps, lists) are written as JSON text.

A value equal to the CDC source's `unavailable.value.placeholder` (an unchanged TOASTed value the
source did not have) is not data: the row leaves that column out, so an upsert or update keeps the
target's value instead of overwriting it with the placeholder.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, Type
from eosconnect.api.errors import DataException
from eosconnect.api.records import SinkRecord, TopicPartition
from eosconnect.connectors.jdbc_sink.config import KAFKA_PK_COLUMNS, InsertMode, PkMode, SinkSettings
from eosconnect.connectors.jdbc_sink.semantic import Writer, generic, writer

__all__ = ["Operation", "Row", "RowMaker", "Shape"]


class Operation(StrEnum):
    INSERT = "insert"
    UPSERT = "upsert"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True)
class Shape:
    """What rows of one kind share: their table, statement and columns. Rows of one shape go into
    one bulk statement; a shape is made once per schema (and kind of key), not per row."""

    table: str
    operation: Operation
    #: The primary key columns' names, then the other columns' names, in the order of a row's values.
    key: tuple[str, ...]
    values: tuple[str, ...]
    #: Column name -> its Connect schema (key columns first), for CREATE/ALTER TABLE. It may name
    #: more columns than `key` and `values` (a row that leaves out a column it does not have).
    columns: dict[str, Schema] = field(compare=False, hash=False)
    #: How each value (key columns', then the others') goes to the driver, None for as it is; None
    #: for the whole row when every value goes as it is, so the writer skips them.
    writers: tuple[Writer | None, ...] | None = field(default=None, compare=False, hash=False)


@dataclass(slots=True)
class Row:
    """What one record writes: `key` holds the primary key columns' values, `values` the others',
    in the order of `shape.key` and `shape.values`."""

    shape: Shape
    key: tuple[Any, ...]
    values: tuple[Any, ...]
    topic_partition: TopicPartition
    offset: int

    @property
    def table(self) -> str:
        return self.shape.table

    @property
    def operation(self) -> Operation:
        return self.shape.operation

    def named(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The key columns and the other columns by name."""
        shape = self.shape
        return dict(zip(shape.key, self.key, strict=True)), dict(zip(shape.values, self.values, strict=True))


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

    def slots(self, struct: Struct) -> list[Any]:
        """The values in field order, as `struct.get` reads them (defaults for empty slots)."""
        values = struct._values
        if self.defaults is not None:
            values = [d if v is None else v for v, d in zip(values, self.defaults, strict=True)]
        return values

    def values(self, struct: Struct) -> dict[str, Any]:
        """Field name -> value, as `struct.get` reads them."""
        return dict(zip(self.names, self.slots(struct), strict=True))

    def picker(self, names: Sequence[str]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
        """A function from `slots` to the values of these fields, as a tuple."""
        index = tuple(self.names.index(n) for n in names)
        if index == tuple(range(len(self.names))):
            return tuple
        if not index:
            return lambda _: ()
        if len(index) == 1:
            (only,) = index
            return lambda slots: (slots[only],)
        return operator.itemgetter(*index)


@dataclass(frozen=True)
class _Plan:
    """How rows come out of Struct values of one schema with key columns of one kind: their shape,
    and which of the value's fields are the key (pk.mode=record_value) and the other columns."""

    shape: Shape
    fields: _StructFields
    pick_values: Callable[[Sequence[Any]], tuple[Any, ...]]
    #: pk.mode=record_value: the key columns' values out of the value's fields.
    pick_key: Callable[[Sequence[Any]], tuple[Any, ...]] | None
    #: What the cache key names by id, kept alive with the entry (so no other object takes its id).
    owners: tuple[Any, ...]
    #: Positions in the picked values of the columns that can hold the placeholder (text, bytes, arrays).
    may_be_unavailable: tuple[int, ...]


@dataclass(frozen=True)
class _KeyPlan:
    """pk.mode=record_key with a Struct key of one schema: the key columns and how to read them."""

    fields: _StructFields
    pick: Callable[[Sequence[Any]], tuple[Any, ...]]
    columns: dict[str, Schema]
    schema: Schema  # kept alive with the entry (the cache is keyed by its id)


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


def _may_be_unavailable(schema: Schema) -> bool:
    """Whether a column of this schema can hold the placeholder: text, bytes, an array of text."""
    if schema.type is Type.ARRAY:
        return schema.value_schema is not None and schema.value_schema.type is Type.STRING
    return schema.type in (Type.STRING, Type.BYTES)


#: The key token of pk.mode none, kafka and record_value (the key columns do not depend on the record).
_FIXED_KEY = ()


class RowMaker:
    """Turns records into rows per the pk.mode, pk.fields, fields.whitelist and insert.mode settings.

    What depends only on a Struct's schema (field names, column types, which fields are key
    columns, the row's shape) is worked out once per schema and shared by its rows: a row of a
    Struct value is then its shape and two tuples picked out of the Struct's values."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings
        self.operation = {
            InsertMode.INSERT: Operation.INSERT,
            InsertMode.UPSERT: Operation.UPSERT,
            InsertMode.UPDATE: Operation.UPDATE,
        }[settings.insert_mode]
        self._structs: dict[Schema, _StructFields] = {}
        #: (table, id(value schema), id(key token)) -> plan; the plan keeps both alive.
        self._plans: dict[tuple[str, int, int], _Plan] = {}
        #: id(key schema) -> its plan (pk.mode=record_key, Struct keys).
        self._key_plans: dict[int, _KeyPlan] = {}
        self._partitions: dict[tuple[str, str, int], tuple[str, TopicPartition]] = {}
        self.zone = ZoneInfo(settings.timezone)
        #: id(schema) -> (the schema, kept alive; how its values are written).
        self._writer_of: dict[int, tuple[Schema, Writer | None]] = {}
        self._generic = generic(self.zone)
        placeholder = settings.placeholder
        #: The placeholder as each kind of column holds it; empty: no value is taken for one.
        self._unavailable = (placeholder, placeholder.encode(), [placeholder]) if placeholder else ()
        #: (table, id(key token)) -> (the token, kept alive; the shape of a tombstone's delete).
        self._deletes: dict[tuple[str, int], tuple[Any, Shape]] = {}
        #: (id(shape), positions left out) -> (the shape, kept alive; the shape without those columns).
        self._partial: dict[tuple[int, tuple[int, ...]], tuple[Shape, Shape]] = {}
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
        # The table is named by the topic as transformed (a RegexRouter's), the position is the
        # consumed partition's: the offsets the flush commits are the consumer's.
        where = (record.topic, record.original_topic, record.original_partition)
        place = self._partitions.get(where)
        if place is None:
            if len(self._partitions) >= _CACHE_LIMIT:
                self._partitions.clear()
            consumed = TopicPartition(record.original_topic, record.original_partition)
            place = self._partitions[where] = (self.settings.table_for(record.topic), consumed)
        table, tp = place
        key, key_columns, key_token = self._key(record)
        value = record.value
        if value is None:
            if not self.settings.delete_enabled:
                return None
            return Row(self._delete_shape(table, key_columns, key_token), key, (), tp, record.offset)
        if key_token is not None and value.__class__ is Struct:
            plan = self._plans.get((table, id(value.schema), id(key_token)))
            if plan is None:
                plan = self._plan(table, value.schema, key_token, key_columns, record)
            slots = plan.fields.slots(value)
            if plan.pick_key is not None:
                key = plan.pick_key(slots)
            row = Row(plan.shape, key, plan.pick_values(slots), tp, record.offset)
            if plan.may_be_unavailable and self._unavailable:
                return self._without_unavailable(row, plan.may_be_unavailable)
            return row
        row = self._row_of_any(record, table, tp, dict(zip(key_columns, key, strict=True)), key_columns)
        if self._unavailable:
            return self._without_unavailable(row, range(len(row.values)))
        return row

    def _delete_shape(self, table: str, key_columns: dict[str, Schema], key_token: Any) -> Shape:
        """The shape of a tombstone's delete, made once per table and kind of key (a key whose
        columns are not cacheable, `key_token` None, gets its own)."""
        if key_token is None:
            return self._new_delete_shape(table, key_columns)
        cached = self._deletes.get((table, id(key_token)))
        if cached is None:
            if len(self._deletes) >= _CACHE_LIMIT:
                self._deletes.clear()
            shape = self._new_delete_shape(table, key_columns)
            cached = self._deletes[(table, id(key_token))] = (key_token, shape)
        return cached[1]

    def _new_delete_shape(self, table: str, key_columns: dict[str, Schema]) -> Shape:
        names = tuple(key_columns)
        return Shape(table, Operation.DELETE, names, (), dict(key_columns), self._writers(key_columns, names))

    def _writers(
        self, columns: Mapping[str, Schema], names: Sequence[str]
    ) -> tuple[Writer | None, ...] | None:
        """How the values of these columns are written (see `Shape.writers`)."""
        writers = []
        for name in names:
            schema = columns[name]
            known = self._writer_of.get(id(schema))
            if known is None:
                if len(self._writer_of) >= _CACHE_LIMIT:
                    self._writer_of.clear()
                known = (schema, writer(schema, self.zone, self.settings.dialect))
                self._writer_of[id(schema)] = known
            writers.append(known[1])
        return None if all(w is None for w in writers) else tuple(writers)

    def _without_unavailable(self, row: Row, candidates: Iterable[int]) -> Row:
        """`row` without the columns whose value is the placeholder (a value the source did not have:
        the target keeps its own). A delete names only its key, so it is left as it is."""
        if row.shape.operation is Operation.DELETE:
            return row
        values, unavailable = row.values, self._unavailable
        out = tuple(i for i in candidates if values[i] in unavailable)
        if not out:
            return row
        cached = self._partial.get((id(row.shape), out))
        if cached is None:
            shape = row.shape
            kept = [i for i in range(len(shape.values)) if i not in out]
            writers = shape.writers
            if writers is not None:
                keys = len(shape.key)
                writers = (*writers[:keys], *(writers[keys + i] for i in kept))
            partial = Shape(
                shape.table,
                shape.operation,
                shape.key,
                tuple(shape.values[i] for i in kept),
                shape.columns,
                writers,
            )
            if len(self._partial) >= _CACHE_LIMIT:
                self._partial.clear()
            cached = self._partial[(id(shape), out)] = (shape, partial)
        partial = cached[1]
        kept_values = tuple(v for i, v in enumerate(values) if i not in out)
        return Row(partial, row.key, kept_values, row.topic_partition, row.offset)

    def _plan(
        self, table: str, schema: Schema, key_token: Any, key_columns: dict[str, Schema], record: SinkRecord
    ) -> _Plan:
        s = self.settings
        fields = self._struct_fields(schema)
        pick_key = None
        if s.pk_mode is PkMode.RECORD_VALUE:
            names = list(s.pk_fields) or list(fields.names)
            for name in names:
                if name not in fields.schemas:
                    raise DataException(
                        f"pk.fields names {name!r}, but the value of {record.topic}-{record.partition}@"
                        f"{record.offset} has no such field (its fields: {', '.join(fields.names)})"
                    )
            key_columns = {name: fields.schemas[name] for name in names}
            pick_key = fields.picker(names)
        value_names = tuple(
            name
            for name in fields.names
            if name not in key_columns and (not s.fields_whitelist or name in s.fields_whitelist)
        )
        columns = {**key_columns, **{n: fields.schemas[n] for n in value_names}}
        columns_in_order = (*key_columns, *value_names)
        shape = Shape(
            table,
            self.operation,
            tuple(key_columns),
            value_names,
            columns,
            self._writers(columns, columns_in_order),
        )
        may_be_unavailable = tuple(
            i for i, name in enumerate(value_names) if _may_be_unavailable(columns[name])
        )
        plan = _Plan(
            shape, fields, fields.picker(value_names), pick_key, (schema, key_token), may_be_unavailable
        )
        if len(self._plans) >= _CACHE_LIMIT:
            self._plans.clear()
        self._plans[(table, id(schema), id(key_token))] = plan
        return plan

    def _row_of_any(
        self,
        record: SinkRecord,
        table: str,
        tp: TopicPartition,
        key: dict[str, Any],
        key_columns: dict[str, Schema],
    ) -> Row:
        """A row of a schemaless map (or of a Struct with a key that is not cached): columns by name."""
        s = self.settings
        value = record.value
        if isinstance(value, Struct):
            struct = self._struct_fields(value.schema)
            fields, schemas = struct.values(value), struct.schemas
        else:
            pairs = _fields(value, record.value_schema, "value", record)
            fields = {name: v for name, (v, _) in pairs.items()}
            schemas = {name: schema for name, (_, schema) in pairs.items()}
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
        value_names = tuple(
            name
            for name in fields
            if name not in key and (not s.fields_whitelist or name in s.fields_whitelist)
        )
        columns = {**key_columns, **{n: schemas[n] for n in value_names}}
        columns_in_order = (*key, *value_names)
        if isinstance(value, Struct):
            writers = self._writers(columns, columns_in_order)
        else:  # schemaless: what each value is says how it is written (nested values as JSON text)
            writers = tuple(self._generic for _ in columns_in_order)
        shape = Shape(table, self.operation, tuple(key), value_names, columns, writers)
        return Row(shape, tuple(key.values()), tuple(fields[n] for n in value_names), tp, record.offset)

    def _key(self, record: SinkRecord) -> tuple[tuple[Any, ...], dict[str, Schema], Any]:
        """The key columns' values and schemas (by name, in order), and a token naming those
        columns for the plan cache (the same token: the same key columns; None: not cacheable)."""
        s = self.settings
        if s.pk_mode is PkMode.KAFKA:
            return (record.topic, record.partition, record.offset), self._kafka_columns, _FIXED_KEY
        if s.pk_mode is not PkMode.RECORD_KEY:
            return (), {}, _FIXED_KEY  # none, or record_value (the value's schema decides)
        key = record.key
        if key is None:
            raise DataException(
                f"pk.mode=record_key, but {record.topic}-{record.partition}@{record.offset} has no key"
            )
        if key.__class__ is Struct:
            plan = self._key_plans.get(id(key.schema))
            if plan is None:
                plan = self._key_plan(key.schema, record)
            return plan.pick(plan.fields.slots(key)), plan.columns, key.schema
        if isinstance(key, Mapping):
            fields = _fields(key, record.key_schema, "key", record)
            names = tuple(s.pk_fields) or tuple(fields)
            missing = [n for n in names if n not in fields]
            if missing:
                raise DataException(
                    f"pk.fields names {missing}, but the key of {record.topic}-{record.partition}@"
                    f"{record.offset} has only {', '.join(fields)}"
                )
            return tuple(fields[n][0] for n in names), {n: fields[n][1] for n in names}, None
        if len(s.pk_fields) != 1:
            raise DataException(
                f"the key of {record.topic}-{record.partition}@{record.offset} is a primitive "
                f"({type(key).__name__}): set pk.fields to the one column name it is written to"
            )
        name = s.pk_fields[0]
        schema = record.key_schema or _inferred(key)
        if schema.type in (Type.STRUCT, Type.MAP, Type.ARRAY):
            raise DataException(f"a {schema.type} key cannot be a primary key column")
        # An inferred schema says nothing about the value (a list is inferred as text): not cached.
        return (key,), {name: schema}, schema if record.key_schema is not None else None

    def _key_plan(self, schema: Schema, record: SinkRecord) -> _KeyPlan:
        struct = self._struct_fields(schema)
        names = self.settings.pk_fields or struct.names
        missing = [n for n in names if n not in struct.schemas]
        if missing:
            raise DataException(
                f"pk.fields names {missing}, but the key of {record.topic}-{record.partition}@"
                f"{record.offset} has only {', '.join(struct.names)}"
            )
        plan = _KeyPlan(struct, struct.picker(names), {n: struct.schemas[n] for n in names}, schema)
        if len(self._key_plans) >= _CACHE_LIMIT:
            self._key_plans.clear()
        self._key_plans[id(schema)] = plan
        return plan
