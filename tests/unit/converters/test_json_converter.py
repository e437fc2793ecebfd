"""JsonConverter with schemas: Kafka's envelope, logical types and settings, byte for byte.

The expected bytes are what Kafka's JsonConverter writes (its asJsonSchema/convertToJson rules);
tests/integration/test_json_converter_differential.py checks the same against Java itself.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

from eosconnect.api import (
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    DataException,
    Date,
    Decimal,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
)
from eosconnect.converters import JsonConverter

UTC = datetime.UTC


def converter(**settings: Any) -> JsonConverter:
    conv = JsonConverter()
    conv.configure({"schemas.enable": True, **settings}, False)
    return conv


def order_schema() -> Schema:
    return (
        SchemaBuilder.struct()
        .name("com.example.Order")
        .version(1)
        .field("id", INT64_SCHEMA)
        .field("amount", Decimal.schema(2))
        .field("day", Date.SCHEMA)
        .field("at", Timestamp.builder().optional().build())
        .field("tags", SchemaBuilder.array(STRING_SCHEMA).optional().build())
        .field("ratio", FLOAT32_SCHEMA)
        .field("codes", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).build())
        .field("note", SchemaBuilder.string().optional().default_value("none").build())
        .build()
    )


ORDER_SCHEMA_JSON = (
    '{"type":"struct","fields":['
    '{"type":"int64","optional":false,"field":"id"},'
    '{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,'
    '"parameters":{"scale":"2"},"field":"amount"},'
    '{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"day"},'
    '{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"at"},'
    '{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"},'
    '{"type":"float","optional":false,"field":"ratio"},'
    '{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"string","optional":false},'
    '"optional":false,"field":"codes"},'
    '{"type":"string","optional":true,"default":"none","field":"note"}'
    '],"optional":false,"name":"com.example.Order","version":1}'
)


def order() -> Struct:
    return (
        Struct(order_schema())
        .put("id", 7)
        .put("amount", decimal.Decimal("12.34"))
        .put("day", datetime.date(2024, 1, 2))
        .put("at", datetime.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC))
        .put("tags", ["a", "é"])
        .put("ratio", 0.5)
        .put("codes", {1: "x"})
        .put("note", "hi")
    )


def test_a_struct_envelope_is_kafkas() -> None:
    wire = converter().from_connect_data("t", order_schema(), order())
    payload = (
        '{"id":7,"amount":"BNI=","day":19724,"at":1704164645006,"tags":["a","é"],"ratio":0.5,'
        '"codes":[[1,"x"]],"note":"hi"}'
    )
    assert wire == ('{"schema":' + ORDER_SCHEMA_JSON + ',"payload":' + payload + "}").encode()


def test_a_struct_envelope_reads_back() -> None:
    conv = converter()
    wire = conv.from_connect_data("t", order_schema(), order())
    back = conv.to_connect_data("t", wire)
    assert back == SchemaAndValue(order_schema(), order())
    assert conv.to_connect_data("t", wire).schema is back.schema  # cached by the schema's text
    # The same through the slow path (whitespace as another writer may leave it).
    spaced = wire.replace(b'{"schema":', b'{ "schema" : ', 1)
    assert conv.to_connect_data("t", spaced) == back


def test_numeric_decimals_and_defaults() -> None:
    numeric = converter(**{"decimal.format": "numeric"})
    schema = SchemaBuilder.struct().field("d", Decimal.schema(3)).field("n", OPTIONAL_STRING_SCHEMA).build()
    value = Struct(schema).put("d", decimal.Decimal("-1.500"))
    wire = numeric.from_connect_data("t", schema, value)
    assert wire.endswith(b',"payload":{"d":-1.500,"n":null}}')
    assert numeric.to_connect_data("t", wire).value.get("d") == decimal.Decimal("-1.500")
    # BASE64 readers take numbers too, as Kafka's do.
    assert converter().to_connect_data("t", wire).value == value


def test_replace_null_with_default() -> None:
    schema = SchemaBuilder.struct().field("n", SchemaBuilder.int32().optional().default_value(5)).build()
    value = Struct(schema)
    assert converter().from_connect_data("t", schema, value).endswith(b'"payload":{"n":5}}')
    keep = converter(**{"replace.null.with.default": False})
    wire = keep.from_connect_data("t", schema, value)
    assert wire.endswith(b'"payload":{"n":null}}')
    assert keep.to_connect_data("t", wire).value.get_without_default("n") is None
    assert converter().to_connect_data("t", wire).value.get_without_default("n") == 5


@pytest.mark.parametrize(
    ("schema", "value", "wire"),
    [
        (INT64_SCHEMA, 5, '{"schema":{"type":"int64","optional":false},"payload":5}'),
        (FLOAT64_SCHEMA, 1e7, '{"schema":{"type":"double","optional":false},"payload":1.0E7}'),
        (FLOAT64_SCHEMA, 1e-5, '{"schema":{"type":"double","optional":false},"payload":1.0E-5}'),
        (FLOAT32_SCHEMA, 1.1, '{"schema":{"type":"float","optional":false},"payload":1.1}'),
        (OPTIONAL_STRING_SCHEMA, None, '{"schema":{"type":"string","optional":true},"payload":null}'),
        (
            SchemaBuilder.bytes().optional().doc("raw").build(),
            b"\x00\x01",
            '{"schema":{"type":"bytes","optional":true,"doc":"raw"},"payload":"AAE="}',
        ),
        (
            SchemaBuilder.map(STRING_SCHEMA, Time.SCHEMA).build(),
            {"noon": datetime.time(12)},
            '{"schema":{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int32",'
            '"optional":false,"name":"org.apache.kafka.connect.data.Time","version":1},"optional":false},'
            '"payload":{"noon":43200000}}',
        ),
        (None, {"a": [1, 2.5]}, '{"schema":null,"payload":{"a":[1,2.5]}}'),
    ],
)
def test_envelopes(schema: Schema | None, value: Any, wire: str) -> None:
    conv = converter()
    assert conv.from_connect_data("t", schema, value) == wire.encode()
    expected = 1.100000023841858 if schema is FLOAT32_SCHEMA else value  # float32 precision
    assert conv.to_connect_data("t", wire.encode()) == SchemaAndValue(schema, expected)


def test_null_and_tombstones() -> None:
    conv = converter()
    assert conv.from_connect_data("t", None, None) is None
    assert conv.to_connect_data("t", None) == SchemaAndValue(None, None)
    with pytest.raises(DataException, match="null value for field that is required"):
        conv.from_connect_data("t", INT32_SCHEMA, None)


def test_envelope_errors_say_what_to_do() -> None:
    conv = converter()
    with pytest.raises(DataException, match=r'requires "schema" and "payload".*schemas.enable=false'):
        conv.to_connect_data("t", b'{"a":1}')
    with pytest.raises(DataException, match="Unknown schema type: int128"):
        conv.to_connect_data("t", b'{"schema":{"type":"int128"},"payload":1}')
    with pytest.raises(DataException, match="Invalid null value for required INT32 field"):
        conv.to_connect_data("t", b'{"schema":{"type":"int32"},"payload":null}')
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).build()
    with pytest.raises(DataException, match=r"topic 't'.*Invalid type for STRUCT: dict"):
        conv.from_connect_data("t", schema, {"id": 1})


def test_schema_content_reads_plain_json() -> None:
    content = '{"type":"struct","fields":[{"field":"id","type":"int64"},{"field":"name","type":"string"}]}'
    conv = converter(**{"schema.content": content})
    read = conv.to_connect_data("t", b'{"id":3,"name":"x","extra":true}')
    assert read.schema.field("id").schema == INT64_SCHEMA
    assert read.value.get("id") == 3 and read.value.get("name") == "x"


@pytest.mark.parametrize("configured", [None, {}, {"decimal.format": "NUMERIC"}])
def test_schemas_are_enabled_unless_set_otherwise_as_in_kafka(configured: dict[str, str] | None) -> None:
    conv = JsonConverter()
    if configured is not None:
        conv.configure(configured, False)
    assert conv.schemas_enabled
    assert (
        conv.from_connect_data("t", INT32_SCHEMA, 7)
        == b'{"schema":{"type":"int32","optional":false},"payload":7}'
    )
    # Kafka writes a value without a schema in the envelope too, with a null schema.
    assert conv.from_connect("t", {"a": 1}) == b'{"schema":null,"payload":{"a":1}}'
    assert conv.to_connect_data("t", b'{"schema":null,"payload":{"a":1}}') == SchemaAndValue(None, {"a": 1})


@pytest.mark.parametrize("setting", [False, "false", "FALSE"])
def test_schemas_enable_false_writes_and_reads_plain_json(setting: Any) -> None:
    conv = JsonConverter()
    conv.configure({"schemas.enable": setting}, True)
    assert not conv.schemas_enabled
    assert conv.from_connect("t", {"a": 1, "b": [True, None]}) == b'{"a":1,"b":[true,null]}'
    assert conv.from_connect_data("t", INT32_SCHEMA, 7) == b"7"
    assert conv.to_connect_data("t", b'{"a":1}') == SchemaAndValue(None, {"a": 1})


def test_plain_json_read_with_schemas_names_the_full_setting() -> None:
    for is_key, setting in (
        (False, "value.converter.schemas.enable"),
        (True, "key.converter.schemas.enable"),
    ):
        conv = JsonConverter()
        conv.configure({}, is_key)
        with pytest.raises(DataException, match=rf"topic 'old'.*{setting.replace('.', '[.]')}=false"):
            conv.to_connect_data("old", b'{"id":1}')


def test_schemas_disabled_writes_a_structs_payload_only() -> None:
    conv = JsonConverter()
    conv.configure({"schemas.enable": "false"}, False)
    wire = conv.from_connect_data("t", order_schema(), order())
    assert wire.startswith(b'{"id":7,"amount":"BNI="')
    assert conv.to_connect_data("t", wire).schema is None


def test_schema_cache_size_is_honoured() -> None:
    conv = converter(**{"schemas.cache.size": 1})
    for schema in (INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA):
        conv.to_connect_data(
            "t", conv.from_connect_data("t", schema, 1 if schema is not STRING_SCHEMA else "x")
        )
    assert len(conv._writing._from_connect_cache) == 1 and len(conv._reading._to_connect_cache) == 1


def test_batch_and_single_values_give_the_same_bytes() -> None:
    conv = converter()
    values = [order(), order()]
    assert list(conv.from_connect_batch("t", values, order_schema())) == [
        conv.from_connect_data("t", order_schema(), v) for v in values
    ]


def test_a_schema_with_a_struct_default_and_parameters_round_trips() -> None:
    inner = SchemaBuilder.struct().field("x", INT32_SCHEMA).build()
    schema = (
        SchemaBuilder.struct()
        .field("p", SchemaBuilder.string().parameter("k", "v").doc("d").build())
        .field("big", SchemaBuilder.int64().default_value(2**40).build())
        .field("inner", inner)
        .build()
    )
    value = Struct(schema).put("p", "s").put("big", 3).put("inner", Struct(inner).put("x", 1))
    conv = converter()
    assert conv.to_connect_data("t", conv.from_connect_data("t", schema, value)) == SchemaAndValue(
        schema, value
    )


def test_a_structs_fields_written_inline_behave_as_their_own_writers() -> None:
    """The compiled struct writer writes plain values inline and hands the rest to each field's
    writer: ranges, bools in int fields, control characters, nulls and defaults as Kafka does."""
    schema = (
        SchemaBuilder.struct()
        .field("i", INT32_SCHEMA)
        .field("s", OPTIONAL_STRING_SCHEMA)
        .field("b", SchemaBuilder.bool().optional().build())
        .field("d", SchemaBuilder.int64().optional().default_value(5).build())
        .build()
    )
    conv = JsonConverter()
    conv.configure({"schemas.enable": False}, False)

    def write(i: Any, s: Any = None, b: Any = None, d: Any = None) -> bytes:
        return conv.from_connect_data("t", schema, Struct._of(schema, [i, s, b, d]))

    assert write(-(2**31), 'a\x01"é', True) == b'{"i":-2147483648,"s":"a\\u0001\\"\xc3\xa9","b":true,"d":5}'
    assert write(1, None, False, 7) == b'{"i":1,"s":null,"b":false,"d":7}'
    with pytest.raises(DataException, match=r"Invalid value 2147483648 for INT32: out of range"):
        write(2**31)
    with pytest.raises(DataException, match="Invalid type for INT32: bool True"):
        write(True)
    with pytest.raises(DataException, match="null value for field that is required"):
        write(None)
    with pytest.raises(DataException, match="Invalid type for STRING: int 3"):
        write(1, 3)
    with pytest.raises(DataException, match="Invalid type for BOOLEAN: int 1"):
        write(1, None, 1)


def test_a_struct_of_an_equal_schema_is_written_and_of_another_refused() -> None:
    def build(field_type: Schema) -> Schema:
        return SchemaBuilder.struct().name("n").field("x", field_type).build()

    conv = JsonConverter()
    conv.configure({"schemas.enable": False}, False)
    first, equal, other = build(INT64_SCHEMA), build(INT64_SCHEMA), build(INT32_SCHEMA)
    assert conv.from_connect_data("t", first, Struct(first).put("x", 1)) == b'{"x":1}'
    assert equal is not first and conv.from_connect_data("t", first, Struct(equal).put("x", 2)) == b'{"x":2}'
    with pytest.raises(DataException, match="Mismatching schema"):
        conv.from_connect_data("t", first, Struct(other).put("x", 3))
