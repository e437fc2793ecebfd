"""Every built-in transformation against Kafka's own class on records with schemas (Struct values).

Key and value are Kafka JsonConverter envelopes (schemas.enable=true): the Java harness reads them with
Kafka's converter, eosconnect with its own; both apply the same chain and write the result back as an
envelope, so the output schemas (names, optionality, defaults, field order, logical types) and values
are compared as Java Connect would put them on the wire.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from support.connect_harness import ConnectHarness
from support.transform_differential import both_with_schemas

K = "org.apache.kafka.connect.transforms."
P = K + "predicates."
TS = 1_700_000_123_456
DAY = 19_675  # 2023-11-14 as days since the epoch

TIMESTAMP = {
    "type": "int64",
    "optional": False,
    "name": "org.apache.kafka.connect.data.Timestamp",
    "version": 1,
}
DATE = {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "version": 1}
DECIMAL = {
    "type": "bytes",
    "optional": False,
    "name": "org.apache.kafka.connect.data.Decimal",
    "version": 1,
    "parameters": {"scale": "2"},
}
INNER = {
    "type": "struct",
    "optional": False,
    "name": "Inner",
    "fields": [
        {"field": "x", "type": "int64", "optional": False},
        {
            "field": "y",
            "type": "struct",
            "optional": True,
            "fields": [{"field": "z", "type": "string", "optional": True}],
        },
    ],
}
ROW_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": "com.example.Row",
    "version": 3,
    "doc": "a row",
    "fields": [
        {"field": "id", "type": "int32", "optional": False},
        {"field": "name", "type": "string", "optional": True},
        {"field": "score", "type": "double", "optional": False},
        {"field": "ratio", "type": "float", "optional": False},
        {"field": "ok", "type": "boolean", "optional": False},
        {"field": "tags", "type": "array", "optional": False, "items": {"type": "string", "optional": False}},
        {"field": "opt", "type": "string", "optional": True, "default": "dflt"},
        {**TIMESTAMP, "field": "at"},
        {**DATE, "field": "day"},
        {**DECIMAL, "field": "amount"},
        {**INNER, "field": "nested"},
    ],
}
ROW = {
    "id": 7,
    "name": "ada",
    "score": 2.5,
    "ratio": 0.1,
    "ok": True,
    "tags": ["a", "b"],
    "opt": None,
    "at": TS,
    "day": DAY,
    "amount": base64.b64encode((1234).to_bytes(2, "big")).decode(),
    "nested": {"x": 1, "y": {"z": "deep"}},
}
KEY = {
    "schema": {
        "type": "struct",
        "optional": False,
        "fields": [{"field": "id", "type": "int32", "optional": False}],
    },
    "payload": {"id": 7},
}


def t(cls: str, **config: str) -> dict[str, Any]:
    return {"class": K + cls, "config": config}


def case(*transforms: dict[str, Any], value: Any = None, key: Any = KEY, **record: Any) -> dict[str, Any]:
    return {
        "topic": "orders",
        "partition": 3,
        "timestamp": TS,
        "key": key,
        "value": {"schema": ROW_SCHEMA, "payload": ROW} if value is None else value,
        "headers": [["trace", "abc"]],
        "transforms": list(transforms),
        **record,
    }


def primitive(type_name: str, payload: Any, **schema: Any) -> dict[str, Any]:
    return {"schema": {"type": type_name, "optional": False, **schema}, "payload": payload}


OPTIONAL_ROW = {"schema": {**ROW_SCHEMA, "optional": True}, "payload": None}
TOMBSTONE_TRANSFORMS = {
    "insert": t("InsertField$Value", **{"static.field": "s", "static.value": "v"}),
    "replace": t("ReplaceField$Value", exclude="id"),
    "extract": t("ExtractField$Value", field="name"),
    "hoist": t("HoistField$Value", field="h"),
    "mask": t("MaskField$Value", fields="name"),
    "flatten": t("Flatten$Value"),
    "cast": t("Cast$Value", spec="id:string"),
    "timestamp": t("TimestampConverter$Value", field="at", **{"target.type": "unix"}),
    "metadata": t("SetSchemaMetadata$Value", **{"schema.name": "N"}),
    "header_from": t("HeaderFrom$Value", fields="id", headers="i", operation="copy"),
    "value_to_key": t("ValueToKey", fields="id"),
}

CASES: dict[str, dict[str, Any]] = {
    **{
        f"tombstone_{name}": {**case(spec), "value": OPTIONAL_ROW}
        for name, spec in TOMBSTONE_TRANSFORMS.items()
    },
    "null_fields_without_defaults": case(
        t("Cast$Value", spec="opt:string", **{"replace.null.with.default": "false"}),
        t("MaskField$Value", fields="name", **{"replace.null.with.default": "false"}),
        value={"schema": ROW_SCHEMA, "payload": {**ROW, "name": None}},
    ),
    "header_from_missing_value": case(
        t("HeaderFrom$Value", fields="name,opt", headers="n,o", operation="copy"),
        value={"schema": ROW_SCHEMA, "payload": {**ROW, "name": None}},
    ),
    "identity": case(),
    "insert_fields": case(
        t(
            "InsertField$Value",
            **{
                "static.field": "src",
                "static.value": "db1",
                "topic.field": "topic!",
                "partition.field": "p",
                "timestamp.field": "ts",
                "offset.field": "off?",
            },
        ),
        kafkaOffset=9,
    ),
    "insert_key": case(t("InsertField$Key", **{"topic.field": "t"})),
    "insert_offset_on_source_fails": case(t("InsertField$Value", **{"offset.field": "off"})),
    "insert_on_primitive_fails": case(
        t("InsertField$Value", **{"topic.field": "t"}), value=primitive("int32", 5)
    ),
    "replace_fields": case(t("ReplaceField$Value", exclude="score,tags", renames="id:order_id,opt:option")),
    "replace_include_no_default": case(
        t("ReplaceField$Value", include="id,opt", **{"replace.null.with.default": "false"})
    ),
    "replace_key": case(t("ReplaceField$Key", renames="id:key_id")),
    "extract_struct": case(t("ExtractField$Value", field="nested")),
    "extract_logical": case(t("ExtractField$Value", field="amount")),
    "extract_default": case(t("ExtractField$Value", field="opt")),
    "extract_unknown_fails": case(t("ExtractField$Value", field="nope")),
    "extract_nested_v2": case(t("ExtractField$Value", field="nested.y.z", **{"field.syntax.version": "V2"})),
    "extract_nested_unknown_v2": case(
        t("ExtractField$Value", field="nested.q", **{"field.syntax.version": "V2"})
    ),
    "extract_key": case(t("ExtractField$Key", field="id")),
    "hoist_value": case(t("HoistField$Value", field="row")),
    "hoist_primitive_key": case(t("HoistField$Key", field="k"), key=primitive("int64", 99)),
    "mask_defaults": case(t("MaskField$Value", fields="id,name,score,ratio,ok,tags,at,day")),
    "mask_replacement": case(t("MaskField$Value", fields="id,name,score", replacement="12")),
    "mask_struct_fails": case(t("MaskField$Value", fields="nested")),
    "value_to_key": case(t("ValueToKey", fields="name,id,at")),
    "value_to_key_nested_v2": case(
        t("ValueToKey", fields="nested.x,id,nested.y.z", **{"field.syntax.version": "V2"})
    ),
    "value_to_key_missing_fails": case(t("ValueToKey", fields="id,nope")),
    "flatten": case(t("Flatten$Value")),
    "flatten_delimiter_key": case(
        t("Flatten$Key", delimiter="_"),
        key={
            "schema": {"type": "struct", "optional": True, "fields": [{**INNER, "field": "k"}]},
            "payload": {"k": {"x": 5, "y": None}},
        },
    ),
    "cast_fields": case(
        t(
            "Cast$Value",
            spec="id:int8,score:int32,ratio:string,ok:string,name:string,at:string,day:int64,amount:float64",
        )
    ),
    "cast_numbers_narrow": case(
        t("Cast$Value", spec="n:int16"),
        value={
            "schema": {
                "type": "struct",
                "optional": False,
                "fields": [{"field": "n", "type": "int64", "optional": True, "default": 70000}],
            },
            "payload": {"n": None},
        },
    ),
    "cast_default_fails": case(t("Cast$Value", spec="opt:int32")),
    "cast_whole_value": case(t("Cast$Value", spec="string"), value=primitive("double", 1e10)),
    "cast_whole_key": case(t("Cast$Key", spec="int64"), key=primitive("string", "42", name="keyname")),
    "cast_struct_field_fails": case(t("Cast$Value", spec="nested:string")),
    "ts_timestamp_to_string": case(
        t(
            "TimestampConverter$Value",
            field="at",
            **{"target.type": "string", "format": "yyyy-MM-dd HH:mm:ss.SSS"},
        )
    ),
    "ts_timestamp_to_unix_seconds": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "unix", "unix.precision": "seconds"})
    ),
    "ts_date_to_timestamp": case(t("TimestampConverter$Value", field="day", **{"target.type": "Timestamp"})),
    "ts_timestamp_to_date_and_time": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "Date"}),
    ),
    "ts_timestamp_to_time": case(t("TimestampConverter$Value", field="at", **{"target.type": "Time"})),
    "ts_whole_string_to_timestamp": case(
        t("TimestampConverter$Value", **{"target.type": "Timestamp", "format": "yyyy-MM-dd'T'HH:mm"}),
        value=primitive("string", "2024-02-29T13:45"),
    ),
    "ts_whole_unix_to_date": case(
        t("TimestampConverter$Value", **{"target.type": "Date"}), value=primitive("int64", TS, optional=True)
    ),
    "ts_wrong_field_type": case(t("TimestampConverter$Value", field="ok", **{"target.type": "unix"})),
    "ts_struct_with_default": case(
        t("TimestampConverter$Value", field="at", **{"target.type": "string", "format": "yyyyMMdd"}),
        value={
            "schema": {
                "type": "struct",
                "optional": True,
                "fields": [{**TIMESTAMP, "field": "at"}, {"field": "n", "type": "int32", "optional": True}],
            },
            "payload": {"at": TS, "n": None},
        },
    ),
    "flatten_optional_parent": case(
        t("Flatten$Value", delimiter="/"),
        value={
            "schema": {
                "type": "struct",
                "optional": False,
                "fields": [
                    {
                        "field": "a",
                        "type": "struct",
                        "optional": True,
                        "fields": [
                            {"field": "b", "type": "int32", "optional": False},
                            {"field": "c", "type": "string", "optional": False, "default": "cd"},
                        ],
                    },
                    {
                        "field": "m",
                        "type": "map",
                        "optional": True,
                        "keys": {"type": "string", "optional": False},
                        "values": {"type": "int32", "optional": False},
                    },
                ],
            },
            "payload": {"a": None, "m": {"k": 1}},
        },
    ),
    "insert_required_timestamp": case(
        t("InsertField$Value", **{"timestamp.field": "ts!", "partition.field": "p!"})
    ),
    "cast_decimal_and_dates_to_string": case(t("Cast$Value", spec="amount:string,day:string,at:int64")),
    "mask_time_and_replacement_bool_fails": case(t("MaskField$Value", fields="ok", replacement="1")),
    "schema_metadata": case(
        t("SetSchemaMetadata$Value", **{"schema.name": "com.example.Renamed", "schema.version": "7"})
    ),
    "schema_metadata_key_primitive": case(
        t("SetSchemaMetadata$Key", **{"schema.name": "KeyName"}), key=primitive("int32", 1)
    ),
    "header_from_copy": case(
        t(
            "HeaderFrom$Value",
            fields="id,ratio,score,tags,at,day,amount,nested,opt",
            headers="a,b,c,d,e,f,g,h,i",
            operation="copy",
        )
    ),
    "header_from_move": case(t("HeaderFrom$Value", fields="name,ok", headers="n,o", operation="move")),
    "routers_and_headers_keep_schemas": case(
        t("RegexRouter", regex="ord(.*)", replacement="x$1"),
        t("TimestampRouter", **{"topic.format": "${topic}.${timestamp}", "timestamp.format": "yyyy-MM"}),
        t("InsertHeader", header="h", **{"value.literal": "v"}),
        t("DropHeaders", headers="trace"),
    ),
    "predicates_on_schema_records": {
        **case(
            {**t("InsertField$Value", **{"static.field": "s", "static.value": "v"}), "predicate": "hasTrace"},
            {**t("Filter"), "predicate": "tomb"},
        ),
        "predicates": {
            "hasTrace": {"class": P + "HasHeaderKey", "config": {"name": "trace"}},
            "tomb": {"class": P + "RecordIsTombstone"},
        },
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_output_as_kafka_with_schemas(name: str, connect_harness: ConnectHarness) -> None:
    ours, kafkas = both_with_schemas(connect_harness, CASES[name])
    assert ours == kafkas


#: The `$Key` variants on the same rows: each `$Value` case above, run on the key instead.
KEY_CASES = {
    f"{name}_on_key": {
        **spec,
        "key": spec["value"],
        "value": KEY,
        "transforms": [
            {**stage, "class": stage["class"].replace("$Value", "$Key")} for stage in spec["transforms"]
        ],
    }
    for name, spec in CASES.items()
    if spec["transforms"] and all(stage["class"].endswith("$Value") for stage in spec["transforms"])
}


@pytest.mark.parametrize("name", sorted(KEY_CASES))
def test_key_variants_same_output_as_kafka(name: str, connect_harness: ConnectHarness) -> None:
    ours, kafkas = both_with_schemas(connect_harness, KEY_CASES[name])
    assert ours == kafkas
