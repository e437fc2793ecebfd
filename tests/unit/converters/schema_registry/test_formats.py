"""The Schema Registry converters' pieces that need no registry: wire format, subjects, Avro mapping."""

from __future__ import annotations

import pytest

from eosconnect.api.data import INT32_SCHEMA, STRING_SCHEMA, Decimal, SchemaBuilder, Struct, Timestamp
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.converters.schema_registry.avro_data import from_avro_schema, to_avro_schema
from eosconnect.converters.schema_registry.protobuf_data import (
    connect_schema,
    message_descriptor,
    to_message,
    to_proto,
)
from eosconnect.converters.schema_registry.protobuf_text import parse_proto
from eosconnect.converters.schema_registry.settings import registry_config_def, subject_name
from eosconnect.converters.schema_registry.wire import (
    frame,
    read_message_indexes,
    unframe,
    write_message_indexes,
)


def test_frame_is_magic_byte_then_big_endian_id():
    data = frame(258, b"payload")
    assert data == b"\x00\x00\x00\x01\x02payload"
    schema_id, rest = unframe(data, "t", "value")
    assert schema_id == 258 and bytes(rest) == b"payload"


@pytest.mark.parametrize("data", [b"", b"\x00\x01", b'{"a":1}'])
def test_unframe_refuses_what_is_not_the_wire_format(data: bytes):
    with pytest.raises(DataException, match=r"Unknown magic byte!.*topic 't'"):
        unframe(data, "t", "value")


@pytest.mark.parametrize(
    ("indexes", "encoded"),
    [([0], b"\x00"), ([1], b"\x02\x02"), ([0, 2], b"\x04\x00\x04"), ([70], b"\x02\x8c\x01")],
)
def test_protobuf_message_indexes_are_zigzag_varints(indexes: list[int], encoded: bytes):
    assert write_message_indexes(indexes) == encoded
    assert read_message_indexes(memoryview(encoded + b"rest")) == (indexes, memoryview(b"rest"))


def test_subject_name_strategies():
    assert subject_name("TopicNameStrategy", "orders", True, None) == "orders-key"
    assert subject_name("TopicNameStrategy", "orders", False, "x.Y") == "orders-value"
    full = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
    assert subject_name(full, "orders", False, "com.example.Order") == "com.example.Order"
    assert (
        subject_name("TopicRecordNameStrategy", "orders", False, "com.example.Order")
        == "orders-com.example.Order"
    )
    with pytest.raises(DataException, match="has none"):
        subject_name("RecordNameStrategy", "orders", False, None)


def test_settings_refuse_unknown_strategy_and_bad_auth_source():
    with pytest.raises(ConfigException, match="unknown subject name strategy"):
        registry_config_def().parse({"value.subject.name.strategy": "Mine"}, prefix="value.converter.")
    with pytest.raises(ConfigException, match=r"basic\.auth\.credentials\.source"):
        registry_config_def().parse({"basic.auth.credentials.source": "SASL"}, prefix="value.converter.")


def test_avro_schema_mapping_round_trips_connect_metadata():
    schema = (
        SchemaBuilder.struct()
        .name("com.example.Thing")
        .version(4)
        .doc("a thing")
        .parameter("origin", "test")
        .field("n", SchemaBuilder.int16().optional().default_value(5).build())
        .field("s", STRING_SCHEMA)
        .field("price", Decimal.builder(3).optional().build())
        .field("at", Timestamp.SCHEMA)
        .field("nested", SchemaBuilder.struct().field("x", INT32_SCHEMA).build())
        .field("m", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).build())
        .build()
    )
    avro = to_avro_schema(schema)
    assert isinstance(avro, dict)
    assert avro["name"] == "Thing" and avro["namespace"] == "com.example"
    assert avro["connect.parameters"] == {"origin": "test"}
    fields = {f["name"]: f for f in avro["fields"]}
    # A non-null default must match the union's first branch: [int, null].
    assert fields["n"]["type"][1] == "null" and fields["n"]["default"] == 5
    assert fields["price"]["type"][0] == "null" and fields["price"]["default"] is None
    assert fields["nested"]["type"]["name"] == "ConnectDefault"
    assert fields["nested"]["type"]["namespace"] == "io.confluent.connect.avro"
    assert from_avro_schema(avro) == schema


def test_avro_unions_beyond_optional_are_confluents_union_structs():
    union = from_avro_schema(["null", "string", "int"])
    assert union.name == "io.confluent.connect.avro.Union" and union.optional
    assert [(f.name, f.schema.type.name, f.schema.optional) for f in union.fields] == [
        ("string", "STRING", True),
        ("int", "INT32", True),
    ]
    assert to_avro_schema(union) == ["null", "string", "int"]
    with pytest.raises(DataException, match="two branches named 'Point'"):
        point = {"type": "record", "name": "Point", "fields": []}
        from_avro_schema(["string", point, {**point, "namespace": "other"}])


FOREIGN_PROTO = """
// written by hand, as teams do
syntax = "proto3";
package shop.v1;
option java_package = "com.shop";

enum Status { STATUS_UNKNOWN = 0; STATUS_PAID = 1 [deprecated = true]; }

message Order {
  reserved 4, 9 to 11;
  /* the id */
  int64 id = 1;
  optional string note = 2 [json_name = "n"];
  repeated Line lines = 3;
  map<string, Line> by_sku = 5;
  Status status = 6;
  message Line { string sku = 1; uint32 qty = 2; }
}
"""


def test_parse_proto_reads_hand_written_files_into_connect_schemas():
    descriptor = message_descriptor(parse_proto(FOREIGN_PROTO), [0])
    schema = connect_schema(descriptor)
    assert schema.name == "shop.v1.Order"
    fields = {f.name: f.schema for f in schema.fields}
    assert fields["id"].type.name == "INT64" and not fields["id"].optional
    assert fields["note"].optional and fields["status"].type.name == "STRING"
    assert fields["lines"].value_schema.field("qty").schema.type.name == "INT64"
    assert fields["by_sku"].key_schema.type.name == "STRING"
    # As protoc does, a map field's entry type is a nested type at the map's place (indexes count it).
    assert message_descriptor(parse_proto(FOREIGN_PROTO), [0, 1]).full_name == "shop.v1.Order.Line"


def test_generated_proto_text_parses_back_to_the_same_message():
    schema = (
        SchemaBuilder.struct()
        .name("com.example.Thing")
        .field("n", SchemaBuilder.int64().optional().build())
        .field("tags", SchemaBuilder.array(STRING_SCHEMA).build())
        .field("m", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).build())
        .build()
    )
    generated = to_proto(schema)
    reparsed = message_descriptor(parse_proto(generated.text), [0])
    assert connect_schema(reparsed) == connect_schema(generated.descriptor)
    assert "optional int64 n = 1;" in generated.text and "map<int32, string> m = 3;" in generated.text


def test_a_named_struct_used_twice_is_defined_once_and_then_named():
    """A Debezium envelope's `before` and `after` share one Value struct: Avro defines a named type
    once and refers to it by its full name afterwards (a reference with properties is not a schema:
    the registry answers 422 and Avro parsers refuse it)."""
    import fastavro

    row = SchemaBuilder.struct().name("shop.public.t.Value").field("id", INT32_SCHEMA).optional().build()
    envelope = SchemaBuilder.struct().name("shop.public.t.Envelope").field("before", row).field("after", row)
    avro = to_avro_schema(envelope.build())
    assert isinstance(avro, dict)
    before, after = (f["type"] for f in avro["fields"])
    assert before[1]["type"] == "record" and before[1]["connect.name"] == "shop.public.t.Value"
    assert after == ["null", "shop.public.t.Value"]
    fastavro.parse_schema(avro)
    back = from_avro_schema(avro)
    assert back.field("after").schema == back.field("before").schema
    assert back.field("after").schema.name == "shop.public.t.Value"


def test_protobuf_keeps_the_names_small_ints_and_parameters_proto3_has_no_place_for():
    """Debezium's semantic types are named primitives (`io.debezium.time.Date` is an int32 of days):
    without their names a sink writes a date as a number. They travel as `(confluent.field_meta)`
    params, which Confluent's reader ignores, so the topic stays readable by it."""
    days = SchemaBuilder.int32().name("io.debezium.time.Date").version(1).optional().build()
    variable = (
        SchemaBuilder.struct()
        .name("io.debezium.data.VariableScaleDecimal")
        .field("scale", INT32_SCHEMA)
        .field("value", SchemaBuilder.bytes().build())
        .optional()
        .build()
    )
    mood = SchemaBuilder.string().name("io.debezium.data.Enum").parameter("allowed", "happy,sad").build()
    schema = (
        SchemaBuilder.struct()
        .name("shop.public.t.Value")
        .field("born", days)
        .field("amount", variable)
        .field("mood", mood)
        .field("tiny", SchemaBuilder.int8().build())
        .field("small", SchemaBuilder.int16().optional().build())
        .field(
            "days", SchemaBuilder.array(SchemaBuilder.int32().name("io.debezium.time.Date").build()).build()
        )
        .build()
    )
    back = connect_schema(message_descriptor(parse_proto(to_proto(schema).text), [0]))
    fields = {f.name: f.schema for f in back.fields}
    assert (fields["born"].name, fields["born"].version, fields["born"].type.name) == (
        "io.debezium.time.Date",
        1,
        "INT32",
    )
    assert fields["amount"].name == "io.debezium.data.VariableScaleDecimal"
    assert fields["mood"].parameters == {"allowed": "happy,sad"}
    assert fields["tiny"].type.name == "INT8" and fields["small"].type.name == "INT16"
    assert fields["days"].value_schema.name == "io.debezium.time.Date"


OPTIONAL_INT32 = SchemaBuilder.int32().optional().build()


def test_protobuf_refuses_a_null_array_element_naming_the_field():
    schema = SchemaBuilder.struct().field("xs", SchemaBuilder.array(OPTIONAL_INT32).build()).build()
    generated = to_proto(schema)
    with pytest.raises(DataException, match=r"field 'xs': element 1 is null.*Avro or JSON Schema"):
        to_message(schema, Struct(schema).put("xs", [1, None]), generated.message_class())
