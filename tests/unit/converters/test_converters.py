"""Converters: Kafka-compatible bytes, round trips, lookup by Kafka/short/Python names, clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from eosconnect.api import (
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_BOOLEAN_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    ConfigException,
    Converter,
    DataException,
    Schema,
    SchemaAndValue,
)
from eosconnect.converters import (
    BooleanConverter,
    ByteArrayConverter,
    IntegerConverter,
    JsonConverter,
    StringConverter,
    converter_from_config,
    resolve_converter_class,
)


class UpperConverter(Converter):
    def from_connect(self, topic: str, value: Any) -> bytes | None:
        return None if value is None else str(value).upper().encode()

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        return None if data is None else data.decode().lower()


def json_converter() -> Converter:
    """A JsonConverter for plain JSON (no envelope), the shape the schemaless cases here are about."""
    return converter_from_config(
        {"value.converter": "json", "value.converter.schemas.enable": "false"}, is_key=False
    )


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ({"b": 1, "a": [1, 2.5, None, True, "x"]}, b'{"b":1,"a":[1,2.5,null,true,"x"]}'),
        ("text", b'"text"'),
        (7, b"7"),
        ({"name": "Zoë"}, '{"name":"Zoë"}'.encode()),
    ],
)
def test_json_is_compact_like_kafka_connect(value: Any, wire: bytes) -> None:
    converter = json_converter()
    assert converter.from_connect("t", value) == wire
    assert converter.to_connect("t", wire) == value


def test_json_schemaless_special_cases_match_kafka() -> None:
    converter = json_converter()
    assert converter.from_connect("t", None) is None and converter.to_connect("t", None) is None
    assert converter.from_connect("t", {"raw": b"\x00\x01"}) == b'{"raw":"AAE="}'  # bytes as base64
    assert converter.from_connect("t", {1: "a"}) == b'[[1,"a"]]'  # non-string keys: array of pairs
    assert converter.from_connect("t", ("a", 1)) == b'["a",1]'


def test_json_errors_name_topic_and_problem() -> None:
    converter = json_converter()
    with pytest.raises(DataException, match=r"topic 'orders'.*set at items\[0\]"):
        converter.from_connect("orders", {"items": [{1, 2}]})
    with pytest.raises(DataException, match="not a finite number"):
        converter.from_connect("orders", float("nan"))
    with pytest.raises(DataException, match=r"from topic 'orders' as JSON.*StringConverter"):
        converter.to_connect("orders", b"not json")


def test_json_converter_settings_are_validated_under_their_full_names() -> None:
    with pytest.raises(ConfigException) as info:
        converter_from_config(
            {"value.converter": "json", "value.converter.decimal.format": "HEX"}, is_key=False
        )
    assert list(info.value.errors) == ["value.converter.decimal.format"]
    with pytest.raises(ConfigException) as info:
        converter_from_config(
            {
                "value.converter": "json",
                "value.converter.schemas.enable": "true",
                "value.converter.schema.content": "{not json",
            },
            is_key=False,
        )
    assert list(info.value.errors) == ["value.converter.schema.content"]
    key = converter_from_config(
        {
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
        },
        is_key=True,
    )
    assert isinstance(key, JsonConverter) and key.is_key and not key.schemas_enabled


def test_string_converter() -> None:
    converter = converter_from_config({"value.converter": "string"}, is_key=False)
    assert converter.from_connect("t", "héllo") == "héllo".encode()
    assert converter.to_connect("t", "héllo".encode()) == "héllo"
    assert converter.from_connect("t", 5) == b"5" and converter.from_connect("t", False) == b"false"
    assert converter.from_connect("t", None) is None
    with pytest.raises(DataException, match="StringConverter cannot write a dict record value to topic 't'"):
        converter.from_connect("t", {"a": 1})
    with pytest.raises(DataException, match="could not decode"):
        converter.to_connect("t", b"\xff")
    latin = converter_from_config(
        {"value.converter": "string", "value.converter.converter.encoding": "latin-1"}, is_key=False
    )
    assert latin.from_connect("t", "é") == b"\xe9"
    with pytest.raises(ConfigException, match="unknown encoding"):
        converter_from_config(
            {"value.converter": "string", "value.converter.converter.encoding": "x"}, is_key=False
        )


def test_byte_array_converter() -> None:
    converter = converter_from_config(
        {"value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"}, is_key=False
    )
    assert (
        converter.from_connect("t", b"\x00") == b"\x00"
        and converter.from_connect("t", bytearray(b"x")) == b"x"
    )
    assert converter.to_connect("t", b"\x01") == b"\x01" and converter.to_connect("t", None) is None
    with pytest.raises(DataException, match=r"ByteArrayConverter needs bytes.*topic 't' is a str"):
        converter.from_connect("t", "text")


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("json", JsonConverter),
        ("org.apache.kafka.connect.json.JsonConverter", JsonConverter),
        ("string", StringConverter),
        ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
        ("bytes", ByteArrayConverter),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
        ("eosconnect.converters.primitives.StringConverter", StringConverter),
        (f"{__name__}.UpperConverter", UpperConverter),
    ],
)
def test_converter_lookup(name: str, cls: type) -> None:
    assert resolve_converter_class(name) is cls
    assert type(converter_from_config({"key.converter": name}, is_key=True)) is cls


def test_default_and_unknown_converters() -> None:
    assert isinstance(converter_from_config({}, is_key=False), JsonConverter)
    with pytest.raises(ConfigException, match=r'"key.converter": is required'):
        converter_from_config({}, is_key=True, default=None)
    with pytest.raises(ConfigException) as info:
        converter_from_config({"value.converter": "io.confluent.connect.avro.NoSuchConverter"}, is_key=False)
    message = str(info.value)
    assert '"value.converter": cannot load converter' in message and "Java class" in message
    assert "Set value.converter to json, string or bytes" in message
    with pytest.raises(ConfigException, match="is not a converter"):
        resolve_converter_class("eosconnect.api.ConfigDef", setting="value.converter")


# --- schema'd forms -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "schema", "value", "wire"),
    [
        (
            "org.apache.kafka.connect.converters.IntegerConverter",
            OPTIONAL_INT32_SCHEMA,
            -2,
            b"\xff\xff\xff\xfe",
        ),
        (
            "org.apache.kafka.connect.converters.LongConverter",
            OPTIONAL_INT64_SCHEMA,
            1,
            b"\x00" * 7 + b"\x01",
        ),
        ("org.apache.kafka.connect.converters.ShortConverter", OPTIONAL_INT16_SCHEMA, 258, b"\x01\x02"),
        (
            "org.apache.kafka.connect.converters.FloatConverter",
            OPTIONAL_FLOAT32_SCHEMA,
            1.5,
            b"\x3f\xc0\x00\x00",
        ),
        (
            "org.apache.kafka.connect.converters.DoubleConverter",
            OPTIONAL_FLOAT64_SCHEMA,
            -2.0,
            b"\xc0" + b"\x00" * 7,
        ),
        ("org.apache.kafka.connect.converters.BooleanConverter", OPTIONAL_BOOLEAN_SCHEMA, True, b"\x01"),
        ("BooleanConverter", OPTIONAL_BOOLEAN_SCHEMA, False, b"\x00"),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", OPTIONAL_BYTES_SCHEMA, b"\x00a", b"\x00a"),
        ("org.apache.kafka.connect.storage.StringConverter", OPTIONAL_STRING_SCHEMA, "Zoë", "Zoë".encode()),
    ],
)
def test_kafkas_primitive_converters(name: str, schema: Schema, value: Any, wire: bytes) -> None:
    converter = converter_from_config({"value.converter": name}, is_key=False)
    assert converter.from_connect_data("t", schema, value) == wire
    assert converter.to_connect_data("t", wire) == SchemaAndValue(schema, value)
    assert converter.to_connect_data("t", None) == SchemaAndValue(schema, None)
    assert converter.from_connect_data("t", schema, None) is None


def test_primitive_converters_refuse_what_kafkas_refuse() -> None:
    with pytest.raises(DataException, match="Failed to serialize to integer"):
        IntegerConverter().from_connect("t", 2**31)
    with pytest.raises(DataException, match="Size of data received by IntegerDeserializer is not 4"):
        IntegerConverter().to_connect("t", b"\x00")
    with pytest.raises(DataException, match="Unexpected byte received by BooleanDeserializer: 2"):
        BooleanConverter().to_connect("t", b"\x02")
    with pytest.raises(DataException, match="Invalid schema type for BooleanConverter: INT32"):
        BooleanConverter().from_connect_data("t", INT32_SCHEMA, True)
    with pytest.raises(DataException, match="Invalid schema type for ByteArrayConverter: STRING"):
        ByteArrayConverter().from_connect_data("t", STRING_SCHEMA, b"x")
    assert StringConverter().from_connect_data("t", FLOAT64_SCHEMA, 1e7) == b"1.0E7"  # Double.toString
    assert StringConverter().from_connect_data("t", FLOAT32_SCHEMA, 1.1) == b"1.1"  # Float.toString


def test_a_converter_written_before_schemas_keeps_working() -> None:
    converter = UpperConverter()
    assert converter.from_connect_data("t", STRING_SCHEMA, "a") == b"A"
    assert converter.to_connect_data("t", b"A") == SchemaAndValue(None, "a")
    assert converter.from_connect_batch("t", ["a", "b"], STRING_SCHEMA) == [b"A", b"B"]
