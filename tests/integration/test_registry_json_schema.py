"""The JSON Schema converter against a real schema registry (Apicurio Registry, Confluent's API):
Confluent's JSONDeserializer validates and reads what it writes, ids are the registry's, and a type
change the subject's BACKWARD rule refuses fails the write naming subject and rule."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eosconnect.api.data import (
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Date,
    Decimal,
    SchemaBuilder,
    Struct,
    Timestamp,
)
from eosconnect.api.errors import DataException
from eosconnect.converters.resolution import converter_from_config
from eosconnect.converters.schema_registry.json_schema import JsonSchemaConverter
from eosconnect.devkafka.registry import LocalSchemaRegistry

ORDER = (
    SchemaBuilder.struct()
    .name("com.example.JsonOrder")
    .version(1)
    .field("id", INT64_SCHEMA)
    .field("note", OPTIONAL_STRING_SCHEMA)
    .field("small", SchemaBuilder.int8().build())
    .field("price", Decimal.schema(2))
    .field("day", Date.SCHEMA)
    .field("at", Timestamp.SCHEMA)
    .field("raw", SchemaBuilder.bytes().build())
    .field("ratio", SchemaBuilder.float64().build())
    .field("tags", SchemaBuilder.array(STRING_SCHEMA).build())
    .field("by_id", SchemaBuilder.map(INT64_SCHEMA, STRING_SCHEMA).build())
    .build()
)


def order(order_id: int) -> Struct:
    return (
        Struct(ORDER)
        .put("id", order_id)
        .put("small", 4)
        .put("price", decimal.Decimal("99999999999999.99"))
        .put("day", datetime.date(1969, 12, 31))
        .put("at", datetime.datetime(2024, 6, 1, tzinfo=datetime.UTC))
        .put("raw", b"\x01\x02")
        .put("ratio", 0.25)
        .put("tags", ["x"])
        .put("by_id", {7: "seven"})
    )


def json_converter(url: str) -> JsonSchemaConverter:
    converter = converter_from_config(
        {
            "value.converter": "io.confluent.connect.json.JsonSchemaConverter",
            "value.converter.schema.registry.url": url,
        },
        is_key=False,
    )
    assert isinstance(converter, JsonSchemaConverter)
    return converter


@pytest.fixture(scope="module")
def registry_client(schema_registry: LocalSchemaRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": schema_registry.url, "timeout": 30})


def test_json_schema_records_read_by_confluents_deserializer(
    schema_registry: LocalSchemaRegistry, registry_client: SchemaRegistryClient
):
    topic = f"json-{uuid.uuid4().hex[:8]}"
    data = json_converter(schema_registry.url).from_connect_data(topic, ORDER, order(1))
    assert data is not None and data[0] == 0
    latest = registry_client.get_latest_version(f"{topic}-value")
    assert int.from_bytes(data[1:5], "big") == latest.schema_id and latest.schema.schema_type == "JSON"
    registered = json.loads(latest.schema.schema_str)
    assert registered["title"] == "com.example.JsonOrder"
    assert registered["properties"]["note"]["oneOf"][0] == {"type": "null"}
    assert registered["properties"]["small"]["connect.type"] == "int8"

    plain = JSONDeserializer(None, schema_registry_client=registry_client)(
        data, SerializationContext(topic, MessageField.VALUE)
    )
    # Every digit is in the bytes (Confluent's Python deserializer itself reads numbers as floats).
    assert b'"price":99999999999999.99,' in data and plain["price"] == pytest.approx(99999999999999.99)
    assert plain["day"] == -1 and plain["raw"] == "AQI=" and plain["by_id"] == [{"key": 7, "value": "seven"}]

    back = json_converter(schema_registry.url).to_connect_data(topic, data)
    assert back.schema == ORDER and back.value == order(1)


def test_json_written_by_confluents_serializer_reads_as_struct(
    schema_registry: LocalSchemaRegistry, registry_client: SchemaRegistryClient
):
    topic = f"json-foreign-{uuid.uuid4().hex[:8]}"
    schema = {
        "type": "object",
        "title": "Reading",
        "properties": {"sensor": {"type": "string"}, "celsius": {"type": "number"}},
    }
    data = JSONSerializer(json.dumps(schema), registry_client)(
        {"sensor": "s1", "celsius": 21.5}, SerializationContext(topic, MessageField.VALUE)
    )
    result = json_converter(schema_registry.url).to_connect_data(topic, data)
    assert result.schema is not None and result.schema.name == "Reading"
    assert result.value.get("sensor") == "s1" and result.value.get("celsius") == 21.5


def test_json_schema_type_change_refused_under_backward(schema_registry: LocalSchemaRegistry):
    topic = f"json-evolve-{uuid.uuid4().hex[:8]}"
    converter = json_converter(schema_registry.url)
    v1 = SchemaBuilder.struct().name("com.example.J").field("a", INT64_SCHEMA).build()
    converter.from_connect_data(topic, v1, Struct(v1).put("a", 1))
    schema_registry.set_compatibility("BACKWARD", subject=f"{topic}-value")
    v2 = SchemaBuilder.struct().name("com.example.J").field("a", STRING_SCHEMA).build()
    with pytest.raises(DataException) as refused:
        converter.from_connect_data(topic, v2, Struct(v2).put("a", "one"))
    assert f"'{topic}-value'" in str(refused.value) and "BACKWARD" in str(refused.value)
