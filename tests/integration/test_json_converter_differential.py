"""eosconnect's JsonConverter against Kafka's own (the Java harness), in both directions.

For each case eosconnect writes a schema and value; Kafka's JsonConverter reads those bytes and writes
them back (`toConnectData` then `fromConnectData`, no transformation). The two texts must be the same
JSON token for token: same keys in the same order, same strings, and the same number text (`1.0E7`,
float32 digits), compared on the harness's answer line as the JVM wrote it. Then eosconnect reads
Java's bytes and must get the value it reads from its own: what Java Connect writes, eosconnect sinks
read, and the other way round.

The harness hands values to Kafka as parsed JSON (Jackson's default mapper reads fractions as doubles),
so NUMERIC decimals here have digits a double holds exactly; everything else is compared as written.
Kafka reads maps into a HashMap, so maps of several entries are written in Java's hash order here, and
values Java reads without a schema (schemas.enable=false, or a null schema) are compared as JSON with
unordered object keys. Java also reads -0.0 as 0.0 (through BigDecimal); see test_negative_zero.
"""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pytest

from eosconnect.api import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Date,
    Decimal,
    Schema,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
)
from eosconnect.converters import JsonConverter
from eosconnect.converters.json_text import json_string
from support.connect_harness import ConnectHarness

UTC = datetime.UTC


class _Number(str):
    """A JSON number kept as the text it was written as."""


class _Object(list):  # type: ignore[type-arg]
    """A JSON object kept as its (key, value) pairs, in order."""


def tokens(text: str, ordered: bool = True) -> str:
    """`text` re-written compactly with number text (and key order, if `ordered`) kept: equal for
    equal JSON tokens. Unordered is for schemaless maps, whose order Java's HashMap does not keep."""
    tree = json.loads(
        text, parse_float=_Number, parse_int=_Number, parse_constant=_Number, object_pairs_hook=_Object
    )
    return _write(tree, ordered)


def _write(node: Any, ordered: bool = True) -> str:
    if isinstance(node, _Number):
        return str(node)
    if isinstance(node, _Object):
        pairs = node if ordered else sorted(node)
        return "{" + ",".join(json_string(k) + ":" + _write(v, ordered) for k, v in pairs) + "}"
    if isinstance(node, list):
        return "[" + ",".join(_write(v, ordered) for v in node) + "]"
    if node is None:
        return "null"
    if node is True or node is False:
        return "true" if node else "false"
    return json_string(node)


def _answer_value_text(line: str) -> str:
    """The "value" member of a harness answer line, exactly as the JVM wrote it (escapes included)."""
    decoder = json.JSONDecoder()
    line = line.strip()
    assert line.startswith("{"), line
    position = 1
    while line[position] != "}":
        key, position = decoder.raw_decode(line, position)
        assert line[position] == ":", line
        start = position + 1
        member, position = decoder.raw_decode(line, start)
        if key == "error":
            pytest.fail(f"Kafka's JsonConverter failed: {member}")
        if key == "value":
            return line[start:position]
        if line[position] == ",":
            position += 1
    raise AssertionError(f"no value in the harness answer {line!r}")


INNER = SchemaBuilder.struct().name("com.example.Inner").field("x", INT32_SCHEMA).build()
EVERYTHING = (
    SchemaBuilder.struct()
    .name("com.example.Everything")
    .version(3)
    .doc("every type once")
    .parameter("owner", "team-a")
    .field("i8", INT8_SCHEMA)
    .field("i16", INT16_SCHEMA)
    .field("i32", INT32_SCHEMA)
    .field("i64", INT64_SCHEMA)
    .field("f32", FLOAT32_SCHEMA)
    .field("f64", FLOAT64_SCHEMA)
    .field("flag", BOOLEAN_SCHEMA)
    .field("text", STRING_SCHEMA)
    .field("raw", BYTES_SCHEMA)
    .field("dec", Decimal.schema(4))
    .field("day", Date.SCHEMA)
    .field("tod", Time.SCHEMA)
    .field("at", Timestamp.SCHEMA)
    .field("list", SchemaBuilder.array(INNER).build())
    .field("smap", SchemaBuilder.map(STRING_SCHEMA, OPTIONAL_FLOAT64_SCHEMA).build())
    .field("imap", SchemaBuilder.map(INT64_SCHEMA, STRING_SCHEMA).optional().build())
    .field("inner", INNER)
    .field("missing", OPTIONAL_STRING_SCHEMA)
    .field("defaulted", SchemaBuilder.int32().optional().default_value(42).doc("d").build())
    .build()
)


def everything() -> Struct:
    return (
        Struct(EVERYTHING)
        .put("i8", -128)
        .put("i16", 32767)
        .put("i32", -(2**31))
        .put("i64", 2**63 - 1)
        .put("f32", 1.1)
        .put("f64", 1e7)
        .put("flag", True)
        .put("text", 'Zoë "quoted" \\ tab\t new\nline \x01 \x1f \u2028 😀')
        .put("raw", bytes(range(256)))
        .put("dec", decimal.Decimal("-12345678901234567890.1234"))
        .put("day", datetime.date(1969, 7, 20))
        .put("tod", datetime.time(23, 59, 59, 999000))
        .put("at", datetime.datetime(1960, 1, 1, 0, 0, 0, 1000, tzinfo=UTC))
        .put("list", [Struct(INNER).put("x", 1), Struct(INNER).put("x", -1)])
        .put("smap", {"a": 0.1, "b": None, "c": 0.0, "d": 1e-5, "e": 123456789.125, "f": 1e300})
        .put("imap", {1: "one", 5: "five"})  # Java's HashMap order: Kafka reads maps into one
        .put("inner", Struct(INNER).put("x", 7))
    )


CASES: list[tuple[str, dict[str, str], Schema | None, Any]] = [
    ("struct-everything", {}, EVERYTHING, everything()),
    ("struct-no-default-replacement", {"replace.null.with.default": "false"}, EVERYTHING, everything()),
    ("struct-schemas-disabled", {"schemas.enable": "false"}, EVERYTHING, everything()),
    ("decimal-numeric", {"decimal.format": "NUMERIC"}, Decimal.schema(2), decimal.Decimal("-1234.5")),
    ("decimal-base64-zero", {}, Decimal.schema(0), decimal.Decimal("0")),
    ("int64", {}, INT64_SCHEMA, -(2**63)),
    ("float32-small", {}, FLOAT32_SCHEMA, 1.0e-10),
    ("float32-large", {}, FLOAT32_SCHEMA, 3.0e38),
    ("float64-third", {}, FLOAT64_SCHEMA, 1 / 3),
    ("float64-thousandth", {}, FLOAT64_SCHEMA, 0.001),
    ("float64-below-thousandth", {}, FLOAT64_SCHEMA, 0.000999),
    ("float64-million", {}, FLOAT64_SCHEMA, 9999999.0),
    ("string-empty", {}, STRING_SCHEMA, ""),
    ("optional-null", {}, OPTIONAL_INT32_SCHEMA, None),
    (
        "array-of-maps",
        {},
        SchemaBuilder.array(SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build()).build(),
        [{"a": 1}, {}],
    ),
    ("timestamp-negative", {}, Timestamp.SCHEMA, datetime.datetime(1900, 1, 1, tzinfo=UTC)),
    ("schemaless-in-envelope", {}, None, {"a": [1, 2.5, "x", None, True], "b": {"c": 1e-7}}),
    ("schemaless-plain", {"schemas.enable": "false"}, None, {"a": [1, 2.5], "n": None, "z": "ü\x1f"}),
]


@pytest.mark.parametrize(("settings", "schema", "value"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_bytes_as_kafkas_json_converter(
    connect_harness: ConnectHarness, settings: dict[str, str], schema: Schema | None, value: Any
) -> None:
    settings = {"schemas.enable": "true", **settings}
    ours = JsonConverter()
    ours.configure(settings, False)
    written = ours.from_connect_data("t", schema, value)
    assert written is not None
    text = written.decode()
    assert tokens(text) == text, "eosconnect's JSON is not compact"

    line = connect_harness.run_line({"converter": settings, "topic": "t", "value": json.loads(text)})
    java_text = _answer_value_text(line)
    if schema is not None and settings["schemas.enable"] == "true":
        assert text == java_text
    else:  # Java reads it without a schema, into a HashMap: the same JSON in its own key order
        assert tokens(text, ordered=False) == tokens(java_text, ordered=False)

    # Java's bytes read by eosconnect: the same schema and value as eosconnect's own bytes give.
    assert ours.to_connect_data("t", java_text.encode()) == ours.to_connect_data("t", written)


def test_negative_zero_reads_as_java_reads_it(connect_harness: ConnectHarness) -> None:
    settings = {"schemas.enable": "true"}
    ours = JsonConverter()
    ours.configure(settings, False)
    written = ours.from_connect_data("t", FLOAT64_SCHEMA, -0.0)
    assert written is not None and written.endswith(b'"payload":-0.0}')  # Java writes -0.0 too ...
    line = connect_harness.run_line({"converter": settings, "topic": "t", "value": json.loads(written)})
    java_text = _answer_value_text(line)
    assert java_text.endswith('"payload":0.0}')  # ... but reads it as 0.0 (BigDecimal has no -0)
    assert str(ours.to_connect_data("t", written).value) == "0.0"


def test_schema_content_reads_plain_json_as_kafka_does(connect_harness: ConnectHarness) -> None:
    """KIP-1054: with `schema.content`, plain JSON (no envelope) is read with that schema; written back
    (schemas.enable=true) it is the envelope Kafka's own converter writes for it."""
    content = (
        '{"type":"struct","name":"com.example.Reading","fields":['
        '{"field":"id","type":"int64"},{"field":"note","type":"string","optional":true},'
        '{"field":"celsius","type":"bytes","name":"org.apache.kafka.connect.data.Decimal",'
        '"parameters":{"scale":"1"}}]}'
    )
    settings = {"schemas.enable": "true", "schema.content": content}
    plain = {"id": 7, "note": None, "celsius": 21.5}
    ours = JsonConverter()
    ours.configure(settings, False)
    read = ours.to_connect_data("t", json.dumps(plain).encode())
    assert read.schema is not None and read.schema.name == "com.example.Reading"
    written = ours.from_connect_data("t", read.schema, read.value)
    assert written is not None
    line = connect_harness.run_line({"converter": settings, "topic": "t", "value": plain})
    assert written.decode() == _answer_value_text(line)
