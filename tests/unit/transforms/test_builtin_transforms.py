"""What the differential tests cannot show: schema-update caching, name resolution, Java's printing rules."""

from __future__ import annotations

import pytest

from eosconnect.api import SourceRecord
from eosconnect.api.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, SchemaBuilder, Struct
from eosconnect.api.errors import DataException
from eosconnect.transforms import InsertField
from eosconnect.transforms.base import SchemaUpdateCache, java_double_str, java_float_str
from eosconnect.transforms.chain import (
    BUILTIN_PREDICATES,
    BUILTIN_TRANSFORMATIONS,
    TransformationChain,
    resolve_predicate_class,
    resolve_transformation_class,
)
from eosconnect.transforms.javadate import JavaDateFormat

KAFKA_TRANSFORMS = [
    "Cast",
    "DropHeaders",
    "ExtractField",
    "Filter",
    "Flatten",
    "HeaderFrom",
    "HoistField",
    "InsertField",
    "InsertHeader",
    "MaskField",
    "RegexRouter",
    "ReplaceField",
    "SetSchemaMetadata",
    "TimestampConverter",
    "TimestampRouter",
    "ValueToKey",
]
KEYED = {
    "Cast",
    "ExtractField",
    "Flatten",
    "HeaderFrom",
    "HoistField",
    "InsertField",
    "MaskField",
    "ReplaceField",
    "SetSchemaMetadata",
    "TimestampConverter",
}


def test_every_kafka_class_name_resolves() -> None:
    for name in KAFKA_TRANSFORMS:
        variants = ["$Key", "$Value"] if name in KEYED else [""]
        for variant in variants:
            cls = resolve_transformation_class(f"org.apache.kafka.connect.transforms.{name}{variant}")
            assert cls.__name__ == name + ("Key" if variant == "$Key" else "")
    for name in ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"):
        assert (
            resolve_predicate_class(f"org.apache.kafka.connect.transforms.predicates.{name}").__name__ == name
        )
    assert (
        len(BUILTIN_TRANSFORMATIONS) == 10 * 5 + 6 * 2 + 2
    )  # and Debezium's ExtractNewRecordState (2 names)
    assert len(BUILTIN_PREDICATES) == 6


def _row_schema(doc: str = "d"):  # type: ignore[no-untyped-def]
    return SchemaBuilder.struct().name("Row").doc(doc).field("id", SchemaBuilder.int32().build()).build()


def test_same_input_schema_gives_the_same_output_schema_object() -> None:
    transform = InsertField[SourceRecord]()
    transform.configure({"static.field": "s", "static.value": "v"})

    def record(schema):  # type: ignore[no-untyped-def]
        return SourceRecord({}, {}, "t", Struct(schema).put("id", 1), value_schema=schema)

    first = transform.apply(record(_row_schema()))
    second = transform.apply(record(_row_schema()))  # equal, not identical, input schema
    other = transform.apply(record(_row_schema("other")))
    assert first is not None and second is not None and other is not None
    assert first.value_schema is second.value_schema
    assert other.value_schema is not first.value_schema
    assert [f.name for f in first.value_schema.fields] == ["id", "s"]
    assert first.value.get("s") == "v"


def test_schema_cache_evicts_the_least_recently_used() -> None:
    cache = SchemaUpdateCache(size=2)
    a, b, c = (_row_schema(doc) for doc in "abc")
    built_a = cache.get_or_build(a, lambda s: s)
    cache.get_or_build(b, lambda s: s)
    assert cache.get_or_build(a, lambda s: _row_schema("rebuilt")) is built_a
    cache.get_or_build(c, lambda s: s)  # evicts b, the least recently used
    assert cache.get_or_build(b, lambda s: _row_schema("rebuilt")).doc == "rebuilt"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.5, "1.5"),
        (100.0, "100.0"),
        (1e7, "1.0E7"),
        (1e10, "1.0E10"),
        (1.25e-5, "1.25E-5"),
        (0.001, "0.001"),
        (-2.5e20, "-2.5E20"),
        (0.0, "0.0"),
        (float("nan"), "NaN"),
    ],
)
def test_java_double_to_string(value: float, text: str) -> None:
    assert java_double_str(value) == text


def test_java_float_to_string_uses_float32_digits() -> None:
    assert java_float_str(0.10000000149011612) == "0.1"


def test_simple_date_format_round_trip() -> None:
    pattern = JavaDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSSZ")
    assert pattern.format(1_700_000_000_123) == "2023-11-14T22:13:20.123+0000"
    assert pattern.parse("2023-11-14T23:13:20.123+0100") == 1_700_000_000_123
    assert JavaDateFormat("yyyyMMdd").parse("20231114") == 1_699_920_000_000
    with pytest.raises(ValueError, match="unsupported pattern character 'w'"):
        JavaDateFormat("yyyy-ww")


def test_bad_settings_are_reported_under_their_full_names() -> None:
    config = {
        "transforms": "c,h",
        "transforms.c.type": "org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.c.spec": "a:decimal",
        "transforms.h.type": "HeaderFrom$Value",
        "transforms.h.fields": "a,b",
        "transforms.h.headers": "x",
        "transforms.h.operation": "copy",
    }
    with pytest.raises(Exception) as info:
        TransformationChain.from_config(config)
    errors = info.value.errors  # type: ignore[attr-defined]
    assert "Invalid type found in casting spec: decimal" in errors["transforms.c.spec"][0]
    assert "same number of elements" in errors["transforms.h.fields"][0]


def test_rest_plugin_list_names_kafkas_transformations_and_predicates() -> None:
    """`GET /connector-plugins?connectorsOnly=false` lists them under Kafka's class names, as Kafka does,
    and the converters (type "converter") under their Java class names."""
    from eosconnect.cluster.herder_reads import HerderReads

    listed = HerderReads.connector_plugins(object.__new__(HerderReads), connectors_only=False)
    by_type: dict[str, set[str]] = {}
    for plugin in listed:
        by_type.setdefault(plugin["type"], set()).add(plugin["class"])
    assert "org.apache.kafka.connect.transforms.Cast$Key" in by_type["transformation"]
    assert "org.apache.kafka.connect.transforms.predicates.HasHeaderKey" in by_type["predicate"]
    assert "io.debezium.transforms.ExtractNewRecordState" in by_type["transformation"]
    assert len(by_type["transformation"]) == 27 and len(by_type["predicate"]) == 3
    assert by_type["converter"] == {
        "org.apache.kafka.connect.json.JsonConverter",
        "org.apache.kafka.connect.storage.StringConverter",
        *(
            f"org.apache.kafka.connect.converters.{name}Converter"
            for name in ("ByteArray", "Boolean", "Double", "Float", "Integer", "Long", "Short")
        ),
        "io.confluent.connect.avro.AvroConverter",
        "io.confluent.connect.json.JsonSchemaConverter",
        "io.confluent.connect.protobuf.ProtobufConverter",
    }
    only_connectors = HerderReads.connector_plugins(object.__new__(HerderReads), connectors_only=True)
    assert {p["type"] for p in only_connectors} == {"source", "sink"}


def test_insert_and_replace_field_copy_struct_fields_and_still_refuse_a_missing_required_one() -> None:
    """Copied fields are not validated again (they were when put), but a required field left null in
    the input still fails at the transformation, as Kafka's Struct.put makes it fail."""
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA).build()
    chain = TransformationChain.from_config(
        {
            "transforms": "insert,replace",
            "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.insert.static.field": "origin",
            "transforms.insert.static.value": "here",
            "transforms.replace.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
            "transforms.replace.renames": "note:remark",
        }
    )

    def record(value: Struct) -> SourceRecord:
        return SourceRecord(
            source_partition={}, source_offset={}, topic="t", value=value, value_schema=schema
        )

    out = chain.apply(record(Struct(schema).put("id", 7).put("note", None)))
    assert out is not None and out.value_schema is not None
    assert [f.name for f in out.value_schema.fields] == ["id", "remark", "origin"]
    assert out.value == Struct(out.value_schema).put("id", 7).put("remark", None).put("origin", "here")
    with pytest.raises(DataException, match='required field: "id"'):
        chain.apply(record(Struct(schema).put("note", "no id")))


def test_timestamp_router_reuses_the_last_name_only_for_the_same_topic_and_timestamp() -> None:
    chain = TransformationChain.from_config(
        {
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.TimestampRouter",
            "transforms.route.timestamp.format": "yyyyMMdd-HH",
        }
    )

    def routed(topic: str, timestamp: int) -> str:
        out = chain.apply(
            SourceRecord(source_partition={}, source_offset={}, topic=topic, value=None, timestamp=timestamp)
        )
        assert out is not None
        return out.topic

    day = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
    assert [routed("a", day), routed("a", day), routed("b", day), routed("b", day + 3_600_000)] == [
        "a-20231114-22",
        "a-20231114-22",
        "b-20231114-22",
        "b-20231114-23",
    ]
    assert routed("a", day) == "a-20231114-22"
