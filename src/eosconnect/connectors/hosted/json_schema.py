"""A hosted stream's JSON Schema (Airbyte's `json_schema`, Singer's `SCHEMA`) as a Connect schema,
and its records' data as values of it.

Sources describe their records loosely: every property may be missing or null, types come as lists
(`["null", "string"]`), objects may have no properties. So every field is optional; `integer` is
INT64, `number` FLOAT64, `boolean` BOOLEAN, `string` (any `format`) STRING, an object with
`properties` a STRUCT, an array an ARRAY of its `items`; anything the schema does not pin down to
one of these (several types, `anyOf`, an object without properties, no type) is STRING holding the
value as JSON text, so no record is refused for a shape its schema allowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from eosconnect.api.data import Schema, SchemaBuilder, Struct, Type

__all__ = ["StreamSchema", "connect_schema"]

Convert = Callable[[Any], Any]
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def _types(js: Mapping[str, Any]) -> list[str]:
    t = js.get("type")
    listed = [t] if isinstance(t, str) else list(t) if isinstance(t, list) else []
    return [x for x in listed if x != "null"]


def _json_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _build(js: Mapping[str, Any], name: str) -> tuple[Schema, Convert]:
    types = _types(js) if isinstance(js, Mapping) else []
    if len(types) != 1:
        return SchemaBuilder.string().optional().build(), _json_text
    t = types[0]
    if t == "integer":
        return SchemaBuilder.int64().optional().build(), lambda v: None if v is None else int(v)
    if t == "number":
        return SchemaBuilder.float64().optional().build(), lambda v: None if v is None else float(v)
    if t == "boolean":
        return SchemaBuilder.bool().optional().build(), lambda v: None if v is None else bool(v)
    if t == "string":
        return (
            SchemaBuilder.string().optional().build(),
            lambda v: v if v is None or isinstance(v, str) else str(v),
        )
    if t == "array":
        items = js.get("items")
        item_schema, item_convert = _build(items if isinstance(items, Mapping) else {}, name)
        schema = SchemaBuilder.array(item_schema).optional().build()
        return schema, lambda v: None if v is None else [item_convert(x) for x in v]
    if t == "object" and isinstance(js.get("properties"), Mapping) and js["properties"]:
        return _struct(js["properties"], name, optional=True)
    return SchemaBuilder.string().optional().build(), _json_text


def _struct(properties: Mapping[str, Any], name: str, optional: bool) -> tuple[Schema, Convert]:
    builder = SchemaBuilder.struct().name(name)
    converts: list[tuple[str, Convert]] = []
    for field, prop in properties.items():
        child, convert = _build(prop if isinstance(prop, Mapping) else {}, f"{name}_{_safe(field)}")
        builder.field(field, child)
        converts.append((field, convert))
    if optional:
        builder.optional()
    schema = builder.build()

    def to_struct(value: Any) -> Any:
        if value is None:
            return None
        struct = Struct(schema)
        for field, convert in converts:
            struct.put(field, convert(value.get(field)))
        return struct

    return schema, to_struct


def _safe(text: str) -> str:
    return _NAME_UNSAFE.sub("_", text)


class StreamSchema:
    """The value schema of one stream's records and the conversion of their data to it.

    `extra` counts properties a record had that the schema did not: they are dropped from the
    Struct (its schema is fixed), and the task logs them once."""

    def __init__(self, stream: str, json_schema: Mapping[str, Any]) -> None:
        self.stream = stream
        properties = json_schema.get("properties") if isinstance(json_schema, Mapping) else None
        self.schema: Schema
        if isinstance(properties, Mapping) and properties:
            self.schema, self._convert = _struct(properties, _safe(stream), optional=False)
            self.fields = frozenset(properties)
        else:
            self.schema, self._convert = SchemaBuilder.string().build(), _json_text
            self.fields = frozenset()
        self.structured = self.schema.type is Type.STRUCT

    def value(self, data: Mapping[str, Any]) -> Any:
        return self._convert(data)

    def unknown_fields(self, data: Mapping[str, Any]) -> list[str]:
        return [k for k in data if k not in self.fields] if self.structured else []


def connect_schema(stream: str, json_schema: Mapping[str, Any]) -> Schema:
    return StreamSchema(stream, json_schema).schema
