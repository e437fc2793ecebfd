"""The Protobuf converter against a real schema registry (Apicurio Registry, Confluent's API):
Confluent's ProtobufDeserializer reads what it writes (message indexes included), ids are the
registry's, and a field type change the subject's BACKWARD rule refuses fails the write."""

from __future__ import annotations

import datetime
import decimal
import uuid

import pytest
from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory

from eosconnect.api.data import (
    INT64_SCHEMA,
    STRING_SCHEMA,
    Date,
    Decimal,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
)
from eosconnect.api.errors import DataException
from eosconnect.converters.resolution import converter_from_config
from eosconnect.converters.schema_registry.protobuf import ProtobufConverter
from eosconnect.converters.schema_registry.protobuf_data import message_descriptor, to_proto
from eosconnect.converters.schema_registry.protobuf_text import parse_proto
from eosconnect.devkafka.registry import LocalSchemaRegistry

ITEM = SchemaBuilder.struct().name("com.example.Item").field("sku", STRING_SCHEMA).build()
ORDER = (
    SchemaBuilder.struct()
    .name("com.example.PbOrder")
    .field("id", INT64_SCHEMA)
    .field("note", SchemaBuilder.string().optional().build())
    .field("small", SchemaBuilder.int16().build())
    .field("ratio", SchemaBuilder.float64().build())
    .field("raw", SchemaBuilder.bytes().build())
    .field("at", Timestamp.SCHEMA)
    .field("tags", SchemaBuilder.array(STRING_SCHEMA).build())
    .field("items", SchemaBuilder.array(ITEM).build())
    .field("counts", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build())
    .build()
)
AT = datetime.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=datetime.UTC)


def order() -> Struct:
    return (
        Struct(ORDER)
        .put("id", 5)
        .put("small", -3)
        .put("ratio", 0.5)
        .put("raw", b"\x00\x01")
        .put("at", AT)
        .put("tags", ["a", "b"])
        .put("items", [Struct(ITEM).put("sku", "s1")])
        .put("counts", {"x": 2})
    )


def protobuf_converter(url: str) -> ProtobufConverter:
    converter = converter_from_config(
        {
            "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
            "value.converter.schema.registry.url": url,
        },
        is_key=False,
    )
    assert isinstance(converter, ProtobufConverter)
    return converter


def test_protobuf_records_read_by_confluents_deserializer(schema_registry: LocalSchemaRegistry):
    topic = f"pb-{uuid.uuid4().hex[:8]}"
    data = protobuf_converter(schema_registry.url).from_connect_data(topic, ORDER, order())
    assert data is not None and data[0] == 0 and data[5] == 0, "magic byte, id, message index [0]"
    latest = SchemaRegistryClient({"url": schema_registry.url}).get_latest_version(f"{topic}-value")
    assert int.from_bytes(data[1:5], "big") == latest.schema_id and latest.schema.schema_type == "PROTOBUF"
    assert "optional string note = 2;" in latest.schema.schema_str

    message_class = to_proto(ORDER).message_class
    plain = ProtobufDeserializer(message_class, {"use.deprecated.format": False})(
        data, SerializationContext(topic, MessageField.VALUE)
    )
    assert plain.id == 5 and not plain.HasField("note") and plain.small == -3 and plain.raw == b"\x00\x01"
    assert plain.at.ToDatetime(tzinfo=datetime.UTC) == AT and list(plain.tags) == ["a", "b"]
    assert plain.items[0].sku == "s1" and dict(plain.counts) == {"x": 2}

    back = protobuf_converter(schema_registry.url).to_connect_data(topic, data)
    assert back.schema is not None and back.schema.name == "com.example.PbOrder"
    value = back.value
    assert (value.get("id"), value.get("note"), value.get("small"), value.get("at")) == (5, None, -3, AT)
    assert value.get("items")[0].get("sku") == "s1" and value.get("counts") == {"x": 2}


def test_date_and_time_as_googles_well_known_types(schema_registry: LocalSchemaRegistry):
    """Date is `google.type.Date`, Time `google.type.TimeOfDay` (as Confluent's ProtobufData maps them):
    Confluent's deserializer reads them, and they read back as Connect's Date and Time."""
    schema = (
        SchemaBuilder.struct()
        .name("com.example.Shift")
        .field("day", Date.SCHEMA)
        .field("starts", Time.SCHEMA)
        .field("off", SchemaBuilder.array(Date.SCHEMA).build())
        .field("note", SchemaBuilder.string().optional().build())
        .build()
    )
    value = (
        Struct(schema)
        .put("day", datetime.date(2024, 2, 29))
        .put("starts", datetime.time(23, 59, 58, 123000))
        .put("off", [datetime.date(2024, 3, 1), datetime.date(1970, 1, 1)])
    )
    topic = f"pb-dates-{uuid.uuid4().hex[:8]}"
    data = protobuf_converter(schema_registry.url).from_connect_data(topic, schema, value)
    assert data is not None
    registered = SchemaRegistryClient({"url": schema_registry.url}).get_latest_version(f"{topic}-value")
    assert 'import "google/type/date.proto";' in registered.schema.schema_str
    assert ".google.type.TimeOfDay starts = 2;" in registered.schema.schema_str

    plain = ProtobufDeserializer(to_proto(schema).message_class, {"use.deprecated.format": False})(
        data, SerializationContext(topic, MessageField.VALUE)
    )
    assert (plain.day.year, plain.day.month, plain.day.day) == (2024, 2, 29)
    assert (plain.starts.hours, plain.starts.minutes, plain.starts.seconds, plain.starts.nanos) == (
        23,
        59,
        58,
        123_000_000,
    )
    assert [(d.year, d.month, d.day) for d in plain.off] == [(2024, 3, 1), (1970, 1, 1)]

    back = protobuf_converter(schema_registry.url).to_connect_data(topic, data)
    assert back.schema is not None
    assert back.schema.field("day").schema.name == Date.LOGICAL_NAME
    assert back.schema.field("starts").schema.name == Time.LOGICAL_NAME
    assert back.value.get("day") == datetime.date(2024, 2, 29)
    assert back.value.get("starts") == datetime.time(23, 59, 58, 123000)
    assert back.value.get("off") == [datetime.date(2024, 3, 1), datetime.date(1970, 1, 1)]


ONEOF_PROTO = """
syntax = "proto3";
package shop.v1;
message Payment {
  int64 id = 1;
  oneof method {
    string card = 2;
    int64 account = 3;
    Wallet wallet = 4;
  }
  message Wallet { string provider = 1; }
}
"""


def test_oneof_groups_as_confluents_union_structs_both_ways(schema_registry: LocalSchemaRegistry):
    """A `oneof` reads as Confluent's ProtobufData has it: a field `<group>_<index>` (before the other
    fields) holding the optional STRUCT `io.confluent.connect.protobuf.Union.<group>` with the member
    that is set; written back, it is a `oneof` again, which Confluent's deserializer reads."""
    client = SchemaRegistryClient({"url": schema_registry.url})
    topic = f"pb-oneof-{uuid.uuid4().hex[:8]}"
    schema_id = client.register_schema(f"{topic}-value", RegistrySchema(ONEOF_PROTO, "PROTOBUF"))
    payment = message_factory.GetMessageClass(message_descriptor(parse_proto(ONEOF_PROTO), [0]))
    by_card, by_wallet, unset = payment(id=1, card="4111"), payment(id=2), payment(id=3)
    by_wallet.wallet.provider = "paypal"
    converter = protobuf_converter(schema_registry.url)
    read = [
        converter.to_connect_data(
            topic, b"\x00" + schema_id.to_bytes(4, "big") + b"\x00" + m.SerializeToString()
        )
        for m in (by_card, by_wallet, unset)
    ]
    schema = read[0].schema
    assert schema is not None and [f.name for f in schema.fields] == ["method_0", "id"]
    union = schema.field("method_0").schema
    assert union.name == "io.confluent.connect.protobuf.Union.method" and union.optional
    assert [f.name for f in union.fields] == ["card", "account", "wallet"]
    assert read[0].value.get("method_0").get("card") == "4111"
    assert read[1].value.get("method_0").get("wallet").get("provider") == "paypal"
    assert read[2].value.get("method_0") is None

    out = f"pb-oneof-out-{uuid.uuid4().hex[:8]}"
    deserialize = ProtobufDeserializer(to_proto(schema).message_class, {"use.deprecated.format": False})
    back = [
        deserialize(
            converter.from_connect_data(out, r.schema, r.value), SerializationContext(out, MessageField.VALUE)
        )
        for r in read
    ]
    assert [(b.id, b.WhichOneof("method")) for b in back] == [(1, "card"), (2, "wallet"), (3, None)]
    assert back[0].card == "4111" and back[1].wallet.provider == "paypal"
    registered = client.get_latest_version(f"{out}-value").schema.schema_str
    assert "oneof method {" in registered


def test_protobuf_field_type_change_refused_under_backward(schema_registry: LocalSchemaRegistry):
    topic = f"pb-evolve-{uuid.uuid4().hex[:8]}"
    converter = protobuf_converter(schema_registry.url)
    v1 = SchemaBuilder.struct().name("com.example.P").field("a", INT64_SCHEMA).build()
    converter.from_connect_data(topic, v1, Struct(v1).put("a", 1))
    schema_registry.set_compatibility("BACKWARD", subject=f"{topic}-value")
    v2 = SchemaBuilder.struct().name("com.example.P").field("a", STRING_SCHEMA).build()
    with pytest.raises(DataException) as refused:
        converter.from_connect_data(topic, v2, Struct(v2).put("a", "one"))
    assert f"'{topic}-value'" in str(refused.value) and "BACKWARD" in str(refused.value)


def test_unsupported_shapes_are_refused_clearly():
    grid = SchemaBuilder.array(SchemaBuilder.array(INT64_SCHEMA).build()).build()
    with pytest.raises(DataException, match="does not support arrays of ARRAY"):
        to_proto(SchemaBuilder.struct().field("grid", grid).build())


def test_decimal_as_confluents_decimal_message(schema_registry: LocalSchemaRegistry):
    """Decimal is `confluent.type.Decimal` (unscaled two's complement bytes, precision, scale), its
    schema's scale and precision in `(confluent.field_meta)` params, as Confluent's ProtobufData writes
    it: Confluent's deserializer reads it, and it reads back as the same Decimal schema and value."""
    schema = (
        SchemaBuilder.struct()
        .name("com.example.Invoice")
        .field("total", Decimal.builder(2).parameter("connect.decimal.precision", "12").build())
        .field("lines", SchemaBuilder.array(Decimal.schema(3)).build())
        .build()
    )
    value = (
        Struct(schema)
        .put("total", decimal.Decimal("-1234.50"))
        .put("lines", [decimal.Decimal("0.125"), decimal.Decimal("99999.000")])
    )
    topic = f"pb-decimal-{uuid.uuid4().hex[:8]}"
    data = protobuf_converter(schema_registry.url).from_connect_data(topic, schema, value)
    assert data is not None
    registered = SchemaRegistryClient({"url": schema_registry.url}).get_latest_version(f"{topic}-value")
    assert 'import "confluent/type/decimal.proto";' in registered.schema.schema_str

    plain = ProtobufDeserializer(to_proto(schema).message_class, {"use.deprecated.format": False})(
        data, SerializationContext(topic, MessageField.VALUE)
    )
    assert (int.from_bytes(plain.total.value, "big", signed=True), plain.total.scale) == (-123450, 2)
    assert plain.total.precision == 6
    assert [(int.from_bytes(d.value, "big", signed=True), d.scale) for d in plain.lines] == [
        (125, 3),
        (99999000, 3),
    ]

    back = protobuf_converter(schema_registry.url).to_connect_data(topic, data)
    assert back.schema is not None
    total = back.schema.field("total").schema
    assert total.name == Decimal.LOGICAL_NAME and total.parameters == {
        "scale": "2",
        "connect.decimal.precision": "12",
    }
    assert back.value.get("total") == decimal.Decimal("-1234.50")
    assert back.value.get("lines") == [decimal.Decimal("0.125"), decimal.Decimal("99999.000")]
