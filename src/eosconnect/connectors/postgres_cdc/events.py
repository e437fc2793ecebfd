"""Debezium's change event format: per table a Key and a Value struct, and the Envelope around them.

Topic `<topic.prefix>.<schema>.<table>`; key: the primary key columns as a struct named
`<prefix>.<schema>.<table>.Key` (null for a table without a primary key); value: the Envelope
`<prefix>.<schema>.<table>.Envelope` {before, after, source, transaction, op, ts_ms, ts_us, ts_ns},
`before`/`after` being `<prefix>.<schema>.<table>.Value` structs and `source` the struct
`io.debezium.connector.postgresql.Source`. A delete is followed by a tombstone (same key, null
value) unless `tombstones.on.delete=false`, so compacted topics drop deleted rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eosconnect.api.data import Schema, SchemaBuilder, Struct, Type
from eosconnect.connectors.debezium.envelope import DEBEZIUM_VERSION, source_builder, table_schemas
from eosconnect.connectors.debezium.modes import DecimalHandling, TimePrecision
from eosconnect.connectors.postgres_cdc.pgoutput import UNCHANGED, Column, TupleValue
from eosconnect.connectors.postgres_cdc.types import IntervalHandling, column_type, type_default

__all__ = [
    "CONNECTOR_NAME",
    "UNAVAILABLE",
    "SourceInfo",
    "TableEvents",
    "TransactionSource",
    "fill_unchanged",
    "source_schema",
    "unavailable",
]

CONNECTOR_NAME = "postgresql"
#: Debezium's `unavailable.value.placeholder`: an unchanged TOASTed value the WAL does not carry.
UNAVAILABLE = "__debezium_unavailable_value"


def source_schema() -> Schema:
    """`io.debezium.connector.postgresql.Source`, the `source` block of every event."""
    return (
        source_builder(CONNECTOR_NAME)
        .field("schema", SchemaBuilder.string().build())
        .field("table", SchemaBuilder.string().build())
        .field("txId", SchemaBuilder.int64().optional().build())
        .field("lsn", SchemaBuilder.int64().optional().build())
        .field("xmin", SchemaBuilder.int64().optional().build())
        .field("origin", SchemaBuilder.string().optional().build())
        .field("origin_lsn", SchemaBuilder.int64().optional().build())
        .build()
    )


SOURCE_SCHEMA = source_schema()


@dataclass(frozen=True)
class SourceInfo:
    """Where an event comes from: the `source` block's variable part."""

    server: str  # topic.prefix
    db: str
    ts: dt.datetime  # commit time (streaming) or snapshot time
    snapshot: str  # "false" while streaming; first/first_in_data_collection/true/.../last in the snapshot
    tx_id: int | None
    lsn: int | None  # the change's own WAL position (the snapshot's consistent point in the snapshot)
    last_commit_lsn: int | None = None  # where the previous transaction's commit record ended

    def struct(self, schema_name: str, table: str) -> Struct:
        return Struct._of(SOURCE_SCHEMA, self.values(schema_name, table))

    def values(self, schema_name: str, table: str, lsn: int | None = None) -> list[Any]:
        """The `source` struct's values in its field order, for the change at `lsn` (default: `self.lsn`)."""
        lsn = self.lsn if lsn is None else lsn
        micros = int(self.ts.timestamp() * 1_000_000)
        sequence = None
        if lsn is not None:
            # json.dumps([previous or None, str(lsn)]) of two decimal numbers, without its cost per event
            sequence = f'{self.sequence_prefix()}{lsn}"]'
        return [
            DEBEZIUM_VERSION,
            CONNECTOR_NAME,
            self.server,
            micros // 1000,
            self.snapshot,
            self.db,
            sequence,
            micros,
            micros * 1000,
            schema_name,
            table,
            self.tx_id,
            lsn,
            None,
            None,
            None,
        ]

    def sequence_prefix(self) -> str:
        return '[null,"' if self.last_commit_lsn is None else f'["{self.last_commit_lsn}","'


_SEQUENCE, _LSN = SOURCE_SCHEMA.field("sequence").index, SOURCE_SCHEMA.field("lsn").index  # type: ignore[union-attr]


class TransactionSource:
    """The `source` blocks of one transaction's changes: all but `sequence` and `lsn` are the same
    for every change of a table, so they are worked out once per table, not once per event."""

    __slots__ = ("_info", "_prefix", "_templates")

    def __init__(self, info: SourceInfo) -> None:
        self._info = info
        self._prefix = info.sequence_prefix()
        self._templates: dict[tuple[str, str], list[Any]] = {}

    def struct(self, schema_name: str, table: str, lsn: int) -> Struct:
        template = self._templates.get((schema_name, table))
        if template is None:
            template = self._templates[(schema_name, table)] = self._info.values(schema_name, table, lsn)
        values = template.copy()
        values[_SEQUENCE] = f'{self._prefix}{lsn}"]'
        values[_LSN] = lsn
        return Struct._of(SOURCE_SCHEMA, values)


class TableEvents:
    """One table's schemas (from a pgoutput Relation or the catalog) and its events' keys and values."""

    def __init__(
        self,
        prefix: str,
        schema_name: str,
        table: str,
        columns: Sequence[Column],
        nullable: Sequence[bool],
        primary_key: Sequence[str],
        decimal_mode: DecimalHandling,
        time_mode: TimePrecision,
        keep_column: Callable[[str, str, str], bool] | None = None,
        type_names: Mapping[int, str] | None = None,
        interval_mode: IntervalHandling = IntervalHandling.NUMERIC,
        placeholder: str = UNAVAILABLE,
    ) -> None:
        self.schema_name, self.table = schema_name, table
        self.topic = f"{prefix}.{schema_name}.{table}"
        # column.include.list / column.exclude.list: positions (in the tuples) of the columns kept
        self._kept = tuple(
            i
            for i, c in enumerate(columns)
            if keep_column is None or c.name in primary_key or keep_column(schema_name, table, c.name)
        )
        columns = [columns[i] for i in self._kept]
        nullable = [nullable[i] for i in self._kept]
        self.columns = tuple(columns)
        self.placeholder = placeholder
        names_of = type_names or {}
        types = [
            column_type(
                c.type_oid, c.type_modifier, decimal_mode, time_mode, names_of.get(c.type_oid), interval_mode
            )
            for c in columns
        ]
        self.converters = tuple(t.convert for t in types)
        field_schemas: dict[str, Schema] = {}
        for column, kind, is_nullable in zip(columns, types, nullable, strict=True):
            builder = kind.builder()
            if is_nullable:
                builder.optional()
            field_schemas[column.name] = builder.build()
        names = [c.name for c in columns]
        schemas = table_schemas(self.topic, list(field_schemas.items()), primary_key, SOURCE_SCHEMA)
        self.value_schema = schemas.value
        self.key_positions = schemas.key_positions
        self.key_schema: Schema | None = schemas.key
        self.envelope_schema = schemas.envelope
        self._fields = [field_schemas[n] for n in names]
        self._full_row = self._compile_row()

    def _compile_row(self) -> Callable[[Sequence[TupleValue]], Struct]:
        """`row` of a whole tuple compiled for this table: straight-line code per column, the texts of
        text columns taken as they are. It runs for every change; behaviour is `_row`'s."""
        namespace: dict[str, Any] = {
            "new_struct": Struct.__new__,
            "Struct": Struct,
            "schema": self.value_schema,
            "UNCHANGED": UNCHANGED,
            "slow": self._row,
        }
        items = []
        for i, (position, convert, schema) in enumerate(
            zip(self._kept, self.converters, self._fields, strict=True)
        ):
            namespace[f"c{i}"], namespace[f"u{i}"], namespace[f"s{i}"] = (
                convert,
                unavailable(schema, self.placeholder),
                schema,
            )
            converted = f"t{i}" if convert is str else f"c{i}(t{i})"
            if schema.type is Type.STRUCT:
                converted = f"fix({converted}, s{i})"
            items.append(
                (
                    f"    t{i} = values[{position}]\n",
                    f"None if t{i} is None else u{i} if t{i} is UNCHANGED else {converted}",
                )
            )
        namespace["fix"] = _own_struct
        needed = max(self._kept, default=-1) + 1
        source = f"""def row(values):
    if len(values) < {needed}:
        return slow(values, False)
{"".join(line for line, _ in items)}    struct = new_struct(Struct)
    struct.schema = schema
    struct._values = [{", ".join(expression for _, expression in items)}]
    return struct
"""
        exec(compile(source, f"<row of {self.topic}>", "exec"), namespace)
        row: Callable[[Sequence[TupleValue]], Struct] = namespace["row"]
        return row

    def row(self, values: Sequence[TupleValue], *, key_only: bool = False) -> Struct:
        """A Value struct from a tuple's texts. With `key_only` (an old key), the columns not sent
        are null, or a type default for NOT NULL ones; unchanged TOASTed values become Debezium's
        placeholder (strings and bytes) or null."""
        if key_only:
            return self._row(values, True)
        return self._full_row(values)

    def _row(self, values: Sequence[TupleValue], key_only: bool) -> Struct:
        out: list[Any] = []
        values = [values[i] if i < len(values) else None for i in self._kept]
        for i, (text, convert, schema) in enumerate(zip(values, self.converters, self._fields, strict=True)):
            if key_only and i not in self.key_positions:
                out.append(None if schema.optional else type_default(schema))
            elif text is None:
                out.append(None)
            elif text is UNCHANGED:
                out.append(unavailable(schema, self.placeholder))
            else:
                out.append(_own_struct(convert(text), schema))  # type: ignore[arg-type]
        return Struct._of(self.value_schema, out)  # built field by field from the schema's own types

    def key(self, row: Struct | None) -> Struct | None:
        if self.key_schema is None or row is None:
            return None
        values = row._values  # the key's columns by position (they are NOT NULL: no defaults to apply)
        return Struct._of(self.key_schema, [values[i] for i in self.key_positions])

    def envelope(
        self, op: str, before: Struct | None, after: Struct | None, source: SourceInfo, now: dt.datetime
    ) -> Struct:
        source_struct = source.struct(self.schema_name, self.table)
        return self.envelope_at(op, before, after, source_struct, int(now.timestamp() * 1_000_000))

    def envelope_at(
        self, op: str, before: Struct | None, after: Struct | None, source: Struct, now_micros: int
    ) -> Struct:
        """`envelope` with the source struct made and the processing time (`ts_*`) in microseconds."""
        return Struct._of(
            self.envelope_schema,
            [before, after, source, None, op, now_micros // 1000, now_micros, now_micros * 1000],
        )


def _own_struct(value: Any, schema: Schema) -> Any:
    """A converted value; a struct (VariableScaleDecimal) re-made with the column's own schema (a
    nullable column's is optional where the converter's is not)."""
    if isinstance(value, Struct) and value.schema is not schema:
        return Struct.from_values(schema, [value.get(f.name) for f in schema.fields], validate=False)
    return value


def unavailable(schema: Schema, placeholder: str = UNAVAILABLE) -> Any:
    """What stands for an unchanged TOASTed value the WAL does not carry, as Debezium writes it: the
    placeholder for text of any kind (json, jsonb and xml too), its bytes for bytea, a one-element
    list for an array of text; null for the rest (no placeholder fits their type). A sink that
    knows the placeholder leaves such a column as it is (see docs/cdc.md)."""
    if schema.type is Type.STRING:
        return placeholder
    if schema.type is Type.BYTES and schema.name is None:
        return placeholder.encode()
    if schema.type is Type.ARRAY and schema.value_schema is not None:
        element = unavailable(schema.value_schema, placeholder)
        return None if element is None else [element]
    return None


def fill_unchanged(new: Sequence[TupleValue], old: Sequence[TupleValue]) -> Sequence[TupleValue]:
    """A new tuple's unchanged TOASTed values taken from the whole old tuple (REPLICA IDENTITY FULL
    logs the old row in full, so the value is known: the event then carries it, as Debezium's)."""
    if len(old) != len(new) or UNCHANGED not in new:
        return new
    return [o if n is UNCHANGED else n for n, o in zip(new, old, strict=True)]
