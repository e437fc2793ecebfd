"""Debezium's envelope schemas, as both CDC sources build them."""

from __future__ import annotations

from eosconnect.api.data import SchemaBuilder
from eosconnect.connectors.debezium.envelope import TRANSACTION_SCHEMA, source_builder, table_schemas
from eosconnect.connectors.mysql_cdc.events import SOURCE_SCHEMAS
from eosconnect.connectors.postgres_cdc.events import SOURCE_SCHEMA

COMMON = ["version", "connector", "name", "ts_ms", "snapshot", "db", "sequence", "ts_us", "ts_ns"]


def test_every_connectors_source_block_starts_with_debeziums_common_fields() -> None:
    for schema in (SOURCE_SCHEMA, *SOURCE_SCHEMAS.values()):
        assert [f.name for f in schema.fields][: len(COMMON)] == COMMON, schema.name
    assert SOURCE_SCHEMA.name == "io.debezium.connector.postgresql.Source"
    assert SOURCE_SCHEMAS["mariadb"].name == "io.debezium.connector.mariadb.Source"


def test_table_schemas_key_the_primary_key_columns_in_its_order_and_wrap_the_value() -> None:
    fields = [
        ("a", SchemaBuilder.int32().build()),
        ("b", SchemaBuilder.string().optional().build()),
        ("c", SchemaBuilder.int64().build()),
    ]
    schemas = table_schemas("p.s.t", fields, ["c", "a"], source_builder("x").build())
    assert schemas.value.name == "p.s.t.Value" and schemas.value.optional
    assert [f.name for f in schemas.value.fields] == ["a", "b", "c"]
    assert schemas.key is not None and schemas.key.name == "p.s.t.Key"
    assert [f.name for f in schemas.key.fields] == ["c", "a"] and schemas.key_positions == (2, 0)
    envelope = schemas.envelope
    assert envelope.name == "p.s.t.Envelope" and envelope.version == 2
    assert [f.name for f in envelope.fields] == [
        "before",
        "after",
        "source",
        "transaction",
        "op",
        "ts_ms",
        "ts_us",
        "ts_ns",
    ]
    assert envelope.field("transaction").schema is TRANSACTION_SCHEMA


def test_a_table_without_a_primary_key_has_no_key_schema() -> None:
    schemas = table_schemas("p.s.t", [("a", SchemaBuilder.int32().build())], [], source_builder("x").build())
    assert schemas.key is None and schemas.key_positions == ()
