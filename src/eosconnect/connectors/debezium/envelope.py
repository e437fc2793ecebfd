"""Debezium's change event: per table a Key and a Value struct, and the Envelope around them.

Topic `<topic.prefix>.<schema or database>.<table>`; key: the primary key columns as a struct named
`<topic>.Key` (null for a table without a primary key); value: the Envelope `<topic>.Envelope`
{before, after, source, transaction, op, ts_ms, ts_us, ts_ns}, `before`/`after` being `<topic>.Value`
structs and `source` the connector's own struct (`io.debezium.connector.<connector>.Source`), whose
first fields every Debezium connector shares (`source_builder`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eosconnect.api.data import Schema, SchemaBuilder

__all__ = ["DEBEZIUM_VERSION", "TRANSACTION_SCHEMA", "TableSchemas", "source_builder", "table_schemas"]

#: The Debezium release whose event format this follows, field by field (reported as source.version):
#: the differential tests against real Debezium compare our events with that release's.
DEBEZIUM_VERSION = "3.7.0.Final"

_SNAPSHOT_ENUM = (
    SchemaBuilder.string()
    .name("io.debezium.data.Enum")
    .version(1)
    .parameter(
        "allowed", "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
    )
    .default_value("false")
    .optional()
    .build()
)

#: The `transaction` block (`provide.transaction.metadata`): null unless that is on.
TRANSACTION_SCHEMA = (
    SchemaBuilder.struct()
    .name("event.block")
    .version(1)
    .optional()
    .field("id", SchemaBuilder.string().build())
    .field("total_order", SchemaBuilder.int64().build())
    .field("data_collection_order", SchemaBuilder.int64().build())
    .build()
)


def source_builder(connector: str) -> SchemaBuilder:
    """`io.debezium.connector.<connector>.Source` with the fields every Debezium connector's
    `source` block starts with (its AbstractSourceInfoStructMaker): the connector adds its own."""
    return (
        SchemaBuilder.struct()
        .name(f"io.debezium.connector.{connector}.Source")
        .version(1)
        .field("version", SchemaBuilder.string().build())
        .field("connector", SchemaBuilder.string().build())
        .field("name", SchemaBuilder.string().build())
        .field("ts_ms", SchemaBuilder.int64().build())
        .field("snapshot", _SNAPSHOT_ENUM)
        .field("db", SchemaBuilder.string().build())
        .field("sequence", SchemaBuilder.string().optional().build())
        .field("ts_us", SchemaBuilder.int64().optional().build())
        .field("ts_ns", SchemaBuilder.int64().optional().build())
    )


@dataclass(frozen=True)
class TableSchemas:
    """One table's Value, Key and Envelope schemas; `key_positions` are the key columns' indexes
    among the value's fields."""

    value: Schema
    key: Schema | None
    key_positions: tuple[int, ...]
    envelope: Schema


def table_schemas(
    topic: str, fields: Sequence[tuple[str, Schema]], primary_key: Sequence[str], source: Schema
) -> TableSchemas:
    """The schemas of a table with these (column name, column schema) fields, in order."""
    value = SchemaBuilder.struct().name(f"{topic}.Value")
    for name, schema in fields:
        value.field(name, schema)
    value_schema = value.optional().build()
    names = [name for name, _ in fields]
    key_positions = tuple(names.index(k) for k in primary_key if k in names)
    key_schema: Schema | None = None
    if key_positions:
        key = SchemaBuilder.struct().name(f"{topic}.Key")
        for position in key_positions:
            key.field(*fields[position])
        key_schema = key.build()
    envelope = (
        SchemaBuilder.struct()
        .name(f"{topic}.Envelope")
        .version(2)
        .field("before", value_schema)
        .field("after", value_schema)
        .field("source", source)
        .field("transaction", TRANSACTION_SCHEMA)
        .field("op", SchemaBuilder.string().build())
        .field("ts_ms", SchemaBuilder.int64().optional().build())
        .field("ts_us", SchemaBuilder.int64().optional().build())
        .field("ts_ns", SchemaBuilder.int64().optional().build())
        .build()
    )
    return TableSchemas(value_schema, key_schema, key_positions, envelope)
