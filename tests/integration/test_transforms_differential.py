"""Every built-in transformation and predicate against Kafka's own class, on the same records.

Each case goes through eosconnect's `TransformationChain` and through Kafka's classes in the Java harness
(one JVM for the session, `connect_harness`); the answers (topic, partition, timestamp, key, value,
headers, or dropped, or the kind of error and whether it came at configure or apply time) must be equal.
Schemaless records here: JSON keys and values as Kafka's JsonConverter with schemas.enable=false reads them.
"""

from __future__ import annotations

from typing import Any

import pytest

from support.connect_harness import ConnectHarness
from support.transform_differential import both

K = "org.apache.kafka.connect.transforms."
P = K + "predicates."
TS = 1_700_000_123_456  # 2023-11-14T22:15:23.456Z

ROW = {
    "id": 7,
    "name": "ada",
    "score": 2.5,
    "ok": True,
    "tags": ["a", "b"],
    "nested": {"x": 1, "y": {"z": "deep"}},
}


def t(cls: str, **config: str) -> dict[str, Any]:
    return {"class": K + cls, "config": config}


def case(*transforms: dict[str, Any], value: Any = ROW, **record: Any) -> dict[str, Any]:
    return {
        "topic": "orders",
        "partition": 3,
        "timestamp": TS,
        "key": {"id": 7},
        "value": value,
        "headers": [["trace", "abc"], ["n", "42"]],
        "transforms": list(transforms),
        **record,
    }


CASES: dict[str, dict[str, Any]] = {
    # InsertField
    "insert_static_and_metadata": case(
        t(
            "InsertField$Value",
            **{
                "static.field": "src",
                "static.value": "db1",
                "topic.field": "topic!",
                "partition.field": "p",
                "timestamp.field": "ts?",
            },
        )
    ),
    "insert_offset_sink": case(t("InsertField$Value", **{"offset.field": "off"}), kafkaOffset=42),
    "insert_key": case(t("InsertField$Key", **{"topic.field": "t"})),
    "insert_tombstone_passes": case(
        t("InsertField$Value", **{"static.field": "s", "static.value": "v"}), value=None
    ),
    "insert_non_map_fails": case(
        t("InsertField$Value", **{"static.field": "s", "static.value": "v"}), value=5
    ),
    # ReplaceField
    "replace_exclude_rename": case(
        t("ReplaceField$Value", exclude="score,ok", renames="id:order_id,name:who")
    ),
    "replace_include": case(t("ReplaceField$Value", include="id,tags")),
    "replace_key": case(t("ReplaceField$Key", renames="id:key_id")),
    "replace_bad_renames": case(t("ReplaceField$Value", renames="id")),
    # ExtractField
    "extract_value": case(t("ExtractField$Value", field="nested")),
    "extract_missing": case(t("ExtractField$Value", field="nope")),
    "extract_key": case(t("ExtractField$Key", field="id")),
    "extract_tombstone": case(t("ExtractField$Value", field="id"), value=None),
    "extract_non_map": case(t("ExtractField$Value", field="id"), value="text"),
    "extract_needs_field": case(t("ExtractField$Value")),
    "extract_nested_v2": case(t("ExtractField$Value", field="nested.y.z", **{"field.syntax.version": "v2"})),
    "extract_backticks_v2": case(
        t("ExtractField$Value", field="`a.b`.c", **{"field.syntax.version": "V2"}), value={"a.b": {"c": 3}}
    ),
    "extract_nested_through_non_map_v2": case(
        t("ExtractField$Value", field="name.x", **{"field.syntax.version": "V2"})
    ),
    "extract_unterminated_backtick_v2": case(
        t("ExtractField$Value", field="`a.b", **{"field.syntax.version": "V2"})
    ),
    "extract_bad_syntax_version": case(t("ExtractField$Value", field="id", **{"field.syntax.version": "V3"})),
    # HoistField
    "hoist_value": case(t("HoistField$Value", field="wrapped")),
    "hoist_scalar_key": case(t("HoistField$Key", field="k"), key=99),
    "hoist_null": case(t("HoistField$Value", field="w"), value=None),
    # MaskField
    "mask_defaults": case(t("MaskField$Value", fields="id,name,score,ok,tags,nested,absent")),
    "mask_replacement": case(t("MaskField$Value", fields="id,name,score", replacement="9")),
    "mask_replacement_fraction": case(t("MaskField$Value", fields="id,score", replacement="12.5")),
    "mask_replacement_bool_fails": case(t("MaskField$Value", fields="ok", replacement="x")),
    "mask_replacement_not_number": case(t("MaskField$Value", fields="id", replacement="abc")),
    "mask_tombstone_fails": case(t("MaskField$Value", fields="id"), value=None),
    "mask_needs_fields": case(t("MaskField$Value", fields="")),
    # ValueToKey
    "value_to_key": case(t("ValueToKey", fields="id,name,absent")),
    "value_to_key_nested_v2": case(
        t("ValueToKey", fields="nested.x,id,nested.y.z,nested.nope", **{"field.syntax.version": "V2"})
    ),
    "value_to_key_non_map": case(t("ValueToKey", fields="id"), value=[1]),
    # Flatten
    "flatten": case(t("Flatten$Value")),
    "flatten_delimiter": case(t("Flatten$Value", delimiter="_")),
    "flatten_key": case(t("Flatten$Key"), key={"a": {"b": 1}, "c": None}),
    "flatten_tombstone": case(t("Flatten$Value"), value=None),
    # Cast
    "cast_fields": case(
        t("Cast$Value", spec="id:string,score:int32,ok:int8,name:string,tags:string"),
        value={"id": 300, "score": -2.7, "ok": True, "name": "x", "tags": None},
    ),
    "cast_narrowing": case(
        t("Cast$Value", spec="a:int8,b:int16,c:int32,d:float64,e:boolean,f:boolean,g:boolean"),
        value={"a": 300, "b": 70000, "c": 5_000_000_000, "d": 3, "e": 0, "f": "TRUE", "g": 2.5},
    ),
    "cast_strings_to_numbers": case(
        t("Cast$Value", spec="a:int64,b:float64,c:int32,d:float32"),
        value={"a": "-12", "b": "1.5e3", "c": "+7", "d": "0.5"},
    ),
    "cast_double_to_string": case(
        t("Cast$Value", spec="a:string,b:string,c:string,d:string"),
        value={"a": 1e10, "b": 0.0001, "c": 100.0, "d": 123456.789},
    ),
    "cast_saturating": case(
        t("Cast$Value", spec="a:int8,b:int64,c:int32,d:boolean,e:float32"),
        value={"a": 1e10, "b": -1e30, "c": float("1e-3"), "d": "yes", "e": 16777217},
    ),
    "cast_exponent_string_to_int_fails": case(t("Cast$Value", spec="a:int32"), value={"a": "1e3"}),
    "cast_whole_key": case(t("Cast$Key", spec="string"), key=12),
    "cast_out_of_range": case(t("Cast$Value", spec="a:int8"), value={"a": "300"}),
    "cast_from_map_fails": case(t("Cast$Value", spec="nested:string")),
    "cast_to_bytes_refused": case(t("Cast$Value", spec="a:bytes")),
    "cast_bad_type": case(t("Cast$Value", spec="a:decimal")),
    "cast_whole_and_field": case(t("Cast$Value", spec="int32,a:int8")),
    # TimestampConverter
    "ts_unix_to_string": case(
        t(
            "TimestampConverter$Value",
            field="at",
            **{"target.type": "string", "format": "yyyy-MM-dd'T'HH:mm:ss.SSSZ"},
        ),
        value={"at": TS},
    ),
    "ts_string_to_unix": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "unix", "format": "yyyy-MM-dd HH:mm:ss"}),
        value={"at": "2024-02-29 13:45:01"},
    ),
    "ts_unix_precision": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "unix", "unix.precision": "seconds"}),
        value={"at": TS},
    ),
    "ts_micro_to_string_whole": case(
        t(
            "TimestampConverter$Value",
            **{
                "target.type": "string",
                "format": "EEE, d MMM yyyy hh:mm:ss a",
                "unix.precision": "microseconds",
            },
        ),
        value=TS * 1000,
    ),
    "ts_key_string": case(
        t("TimestampConverter$Key", **{"target.type": "string", "format": "yyyyMMddHHmm"}), key=TS
    ),
    "ts_lenient_parse": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "unix", "format": "yyyy-MM-dd HH:mm"}),
        value={"at": "2024-13-32 25:61 trailing"},
    ),
    "ts_string_to_string": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "string", "format": "dd/MM/yy"}),
        value={"at": "01/02/99"},
    ),
    "ts_bad_string": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "unix", "format": "yyyy-MM-dd"}),
        value={"at": "not a date"},
    ),
    "ts_string_needs_format": case(t("TimestampConverter$Value", **{"target.type": "string"})),
    "ts_bad_target": case(t("TimestampConverter$Value", **{"target.type": "epoch"})),
    "ts_unsupported_input": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "unix"}), value={"at": 1.5}
    ),
    # SetSchemaMetadata (schemaless: only a null operand passes)
    "schema_metadata_needs_schema": case(t("SetSchemaMetadata$Value", **{"schema.name": "x"})),
    "schema_metadata_tombstone": case(t("SetSchemaMetadata$Value", **{"schema.name": "x"}), value=None),
    # Routing
    "regex_router": case(t("RegexRouter", regex="(ord)(ers)", replacement="$2-$1-x")),
    "regex_router_named_group": case(
        t("RegexRouter", regex="(?<head>o)rd(?<!x)(e)\\w+", replacement="${head}-$2-\\$")
    ),
    "regex_router_no_match": case(t("RegexRouter", regex="ord", replacement="x")),
    "timestamp_router": case(t("TimestampRouter")),
    "timestamp_router_format": case(
        t("TimestampRouter", **{"topic.format": "${timestamp}_${topic}", "timestamp.format": "yyyy.MM.dd-HH"})
    ),
    "timestamp_router_needs_timestamp": case(t("TimestampRouter"), timestamp=None),
    "filter": case(t("Filter")),
    # Headers
    "drop_headers": case(t("DropHeaders", headers="trace,absent")),
    **{
        f"insert_header_literal_{i}": case(t("InsertHeader", header="h", **{"value.literal": literal}))
        for i, literal in enumerate(
            [
                "42",
                " 7 ",
                "07",
                "+5",
                "-5",
                "3.0",
                "1.50",
                "0.1",
                "1e3",
                "1.5e-10",
                "0.1234567890123",
                "123456789012345678901",
                "[1, 2]",
                '{"a": 1}',
                '["a", 1]',
                "[a, b]",
                "x y",
                "",
                "true",
                "TRUE",
                "2024-01-02",
                "NaN",
            ]
        )
    },
    "extract_empty_field_name": case(t("ExtractField$Value", field="")),
    "insert_header": case(t("InsertHeader", header="h", **{"value.literal": "hello"})),
    "header_from_copy": case(
        t("HeaderFrom$Value", fields="id,name,tags,nested,score,ok", headers="a,b,c,d,e,f", operation="copy")
    ),
    "header_from_missing_field": case(t("HeaderFrom$Value", fields="nope", headers="h", operation="move")),
    "header_from_tombstone_fails": case(
        t("HeaderFrom$Value", fields="id", headers="h", operation="copy"), value=None
    ),
    "header_from_move_key": case(t("HeaderFrom$Key", fields="id", headers="kid", operation="move")),
    "header_from_counts_differ": case(t("HeaderFrom$Value", fields="id,name", headers="a", operation="copy")),
    "header_from_bad_operation": case(t("HeaderFrom$Value", fields="id", headers="a", operation="swap")),
    # A chain with predicates and negate
    "chain_with_predicates": {
        **case(
            {
                **t("InsertField$Value", **{"static.field": "seen", "static.value": "1"}),
                "predicate": "hasTrace",
            },
            {**t("Filter"), "predicate": "isOrders", "negate": True},
            {**t("RegexRouter", regex="orders", replacement="kept"), "predicate": "tomb"},
        ),
        "predicates": {
            "hasTrace": {"class": P + "HasHeaderKey", "config": {"name": "trace"}},
            "isOrders": {"class": P + "TopicNameMatches", "config": {"pattern": "ord.*"}},
            "tomb": {"class": P + "RecordIsTombstone"},
        },
    },
    "predicate_drops_other_topics": {
        **case({**t("Filter"), "predicate": "isOrders", "negate": True}, topic="payments"),
        "predicates": {"isOrders": {"class": P + "TopicNameMatches", "config": {"pattern": "ord.*"}}},
    },
    "tombstone_predicate": {
        **case({**t("Filter"), "predicate": "tomb"}, value=None),
        "predicates": {"tomb": {"class": P + "RecordIsTombstone"}},
    },
    "predicate_named_group": {
        **case({**t("Filter"), "predicate": "p"}),
        "predicates": {"p": {"class": P + "TopicNameMatches", "config": {"pattern": "(?<a>or)d\\k<a>?ers"}}},
    },
    "empty_predicate_pattern": {
        **case({**t("Filter"), "predicate": "p"}),
        "predicates": {"p": {"class": P + "TopicNameMatches", "config": {"pattern": ""}}},
    },
    "bad_predicate_pattern": {
        **case({**t("Filter"), "predicate": "p"}),
        "predicates": {"p": {"class": P + "TopicNameMatches", "config": {"pattern": "("}}},
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_output_as_kafka(name: str, connect_harness: ConnectHarness) -> None:
    ours, kafkas = both(connect_harness, CASES[name])
    assert ours == kafkas


#: The `$Key` variants: each `$Value` case above, run on the key instead.
KEY_CASES = {
    f"{name}_on_key": {
        **spec,
        "key": spec["value"],
        "value": {"id": 7},
        "transforms": [
            {**stage, "class": stage["class"].replace("$Value", "$Key")} for stage in spec["transforms"]
        ],
    }
    for name, spec in CASES.items()
    if spec["transforms"] and all(stage["class"].endswith("$Value") for stage in spec["transforms"])
}


@pytest.mark.parametrize("name", sorted(KEY_CASES))
def test_key_variants_same_output_as_kafka(name: str, connect_harness: ConnectHarness) -> None:
    ours, kafkas = both(connect_harness, KEY_CASES[name])
    assert ours == kafkas


#: Settings eosconnect reads that Kafka 4 no longer defines (Kafka 3.x's deprecated names).
OUR_EXTRA_SETTINGS = {"ReplaceField": {"blacklist", "whitelist"}}


def _kafka_classes() -> list[str]:
    from eosconnect.transforms.chain import BUILTIN_PREDICATES, BUILTIN_TRANSFORMATIONS

    return sorted(n for n in [*BUILTIN_TRANSFORMATIONS, *BUILTIN_PREDICATES] if n.startswith("org."))


@pytest.mark.parametrize("kafka_class", _kafka_classes())
def test_same_settings_as_kafka(kafka_class: str, connect_harness: ConnectHarness) -> None:
    """Same setting names, types, defaults and importance as Kafka's ConfigDef for the class."""
    from eosconnect.transforms.chain import resolve_predicate_class, resolve_transformation_class

    is_predicate = ".predicates." in kafka_class
    cls = (resolve_predicate_class if is_predicate else resolve_transformation_class)(kafka_class)
    ours = {}
    for info in cls().config_def().describe():
        default = "<required>" if info.required else info.default_value
        ours[info.name] = {"type": info.type.value, "default": default, "importance": info.importance.value}
    family = kafka_class.rsplit(".", 1)[1].split("$")[0]
    for extra in OUR_EXTRA_SETTINGS.get(family, ()):
        del ours[extra]
    kafkas = {
        item["name"]: {"type": item["type"], "default": item["default"], "importance": item["importance"]}
        for item in connect_harness.run({"describe": kafka_class})["config"]
    }
    assert ours == kafkas
