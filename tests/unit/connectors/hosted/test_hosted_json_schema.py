"""Stream JSON Schemas as Connect schemas, and record data as values of them."""

from __future__ import annotations

import json

from eosconnect.api.data import Struct, Type
from eosconnect.connectors.hosted.json_schema import StreamSchema

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "price": {"type": ["null", "number"]},
        "ok": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
        "blob": {"type": "object"},
        "either": {"type": ["string", "integer"]},
    },
}


def test_types_map_to_optional_connect_fields():
    schema = StreamSchema("crm.users", SCHEMA).schema
    types = {f.name: f.schema.type for f in schema.fields}
    assert types == {
        "id": Type.INT64,
        "price": Type.FLOAT64,
        "ok": Type.BOOLEAN,
        "at": Type.STRING,
        "tags": Type.ARRAY,
        "address": Type.STRUCT,
        "blob": Type.STRING,
        "either": Type.STRING,
    }
    assert all(f.schema.optional for f in schema.fields)
    assert schema.name == "crm_users"


def test_values_follow_the_schema_and_loose_parts_become_json_text():
    stream = StreamSchema("users", SCHEMA)
    value = stream.value(
        {
            "id": 3,
            "price": 2,
            "tags": ["a"],
            "address": {"city": "Oslo"},
            "blob": {"k": [1]},
            "either": 5,
            "x": 1,
        }
    )
    assert isinstance(value, Struct)
    assert value.get("id") == 3 and value.get("price") == 2.0 and value.get("ok") is None
    assert value.get("address").get("city") == "Oslo"
    assert json.loads(value.get("blob")) == {"k": [1]} and value.get("either") == "5"
    assert stream.unknown_fields({"id": 1, "x": 1}) == ["x"]


def test_a_schema_without_properties_is_json_text():
    stream = StreamSchema("raw", {"type": "object"})
    assert stream.schema.type is Type.STRING and not stream.structured
    assert json.loads(stream.value({"a": 1})) == {"a": 1}
