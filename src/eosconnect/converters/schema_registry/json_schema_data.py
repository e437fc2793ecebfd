"""Connect schemas and values <-> JSON Schema, as Confluent's `io.confluent.connect.json.JsonSchemaData`.

- INT8..INT64 are `{"type": "integer", "connect.type": "int8"|...|"int64"}`, FLOAT32/64
  `{"type": "number", "connect.type": "float32"|"float64"}`, BOOLEAN `boolean`, STRING `string`,
  BYTES `{"type": "string", "connect.type": "bytes"}` (base64 text in the payload);
- Decimal is `{"type": "number", "connect.type": "bytes"}` titled with its logical name, written as a JSON
  number with every digit (Confluent's `decimal.format=NUMERIC`); Date, Time and Timestamp are integers
  titled with theirs;
- ARRAY is `array` with `items`; MAP with STRING keys an `object` with `additionalProperties`, any other
  MAP an `array` of `{key, value}` objects, both with `"connect.type": "map"`;
- STRUCT is an `object` whose `properties` keep the field order and carry `connect.index`;
- an optional schema is `{"oneOf": [{"type": "null"}, T]}`;
- name, version, doc, parameters and default are `title`, `connect.version`, `description`,
  `connect.parameters` and `default`.
"""

from __future__ import annotations

import base64
import decimal
import json
from collections.abc import Callable, Mapping
from typing import Any

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, Type
from eosconnect.api.errors import DataException
from eosconnect.converters.schema_registry.value_walk import value_converter

__all__ = [
    "dump_json",
    "from_json_schema",
    "from_json_value",
    "has_decimal",
    "to_json_schema",
    "to_json_value",
]

_CONNECT_TYPES = {
    Type.INT8: ("integer", "int8"),
    Type.INT16: ("integer", "int16"),
    Type.INT32: ("integer", "int32"),
    Type.INT64: ("integer", "int64"),
    Type.FLOAT32: ("number", "float32"),
    Type.FLOAT64: ("number", "float64"),
}
_LOGICAL: dict[str, type[Date] | type[Time] | type[Timestamp]] = {
    Date.LOGICAL_NAME: Date,
    Time.LOGICAL_NAME: Time,
    Timestamp.LOGICAL_NAME: Timestamp,
}


def to_json_schema(schema: Schema) -> dict[str, Any]:
    return _to_json(schema, None)


def _to_json(schema: Schema, index: int | None) -> dict[str, Any]:
    t = schema.type
    out: dict[str, Any]
    if t in _CONNECT_TYPES:
        json_type, connect_type = _CONNECT_TYPES[t]
        out = {"type": json_type, "connect.type": connect_type}
    elif t is Type.BOOLEAN:
        out = {"type": "boolean"}
    elif t is Type.STRING:
        out = {"type": "string"}
    elif t is Type.BYTES:
        json_type = "number" if schema.name == Decimal.LOGICAL_NAME else "string"
        out = {"type": json_type, "connect.type": "bytes"}
    elif t is Type.ARRAY:
        out = {"type": "array", "items": _to_json(_not_none(schema.value_schema), None)}
    elif t is Type.MAP:
        key_schema, value_schema = _not_none(schema.key_schema), _not_none(schema.value_schema)
        if key_schema.type is Type.STRING and not key_schema.optional:
            out = {"type": "object", "additionalProperties": _to_json(value_schema, None)}
        else:
            entry = {
                "type": "object",
                "properties": {"key": _to_json(key_schema, 0), "value": _to_json(value_schema, 1)},
            }
            out = {"type": "array", "items": entry}
        out["connect.type"] = "map"
    else:
        out = {
            "type": "object",
            "properties": {f.name: _to_json(f.schema, f.index) for f in schema.fields},
        }
    if schema.name is not None:
        out["title"] = schema.name
    if schema.version is not None:
        out["connect.version"] = schema.version
    if schema.doc is not None:
        out["description"] = schema.doc
    if schema.parameters:
        out["connect.parameters"] = dict(schema.parameters)
    if schema.default_value is not None:
        out["default"] = json.loads(dump_json(to_json_value(schema, schema.default_value)))
    if schema.optional:
        out = {"oneOf": [{"type": "null"}, out]}
    if index is not None:
        out["connect.index"] = index
    return out


def _not_none(schema: Schema | None) -> Schema:
    if schema is None:
        raise DataException("an ARRAY or MAP schema without element schemas cannot be written as JSON Schema")
    return schema


def to_json_value(schema: Schema, value: Any) -> Any:
    """A Connect value as JSON-ready data (Decimals stay `decimal.Decimal`: `dump_json` writes them)."""
    return json_value_converter(schema)(value)


def json_value_converter(schema: Schema) -> Callable[[Any], Any]:
    """`to_json_value` compiled for one schema (see `value_walk`): the converter keeps one per schema."""
    return value_converter(schema, _json_special, _json_null)


def _json_null(schema: Schema) -> str:
    return f"Conversion error: null value for a required {schema.type} (schema {schema!r})"


def _json_special(schema: Schema, child: Any) -> Callable[[Any], Any] | None:
    """JSON Schema's own: a Decimal stays a `decimal.Decimal` (an exact number), BYTES are base64."""
    if schema.name == Decimal.LOGICAL_NAME:

        def exact(value: Any) -> Any:
            if not isinstance(value, decimal.Decimal):
                raise DataException(f"a Decimal value must be a decimal.Decimal, got {type(value).__name__}")
            return value

        return exact
    if schema.type is Type.BYTES:
        return lambda value: base64.b64encode(bytes(value)).decode()
    return None


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def has_decimal(schema: Schema) -> bool:
    """Whether values of `schema` can hold a Decimal (only those need `dump_json`'s slow path)."""
    if schema.name == Decimal.LOGICAL_NAME:
        return True
    if schema.type is Type.STRUCT:
        return any(has_decimal(f.schema) for f in schema.fields)
    if schema.type is Type.ARRAY:
        return has_decimal(_not_none(schema.value_schema))
    if schema.type is Type.MAP:
        return has_decimal(_not_none(schema.key_schema)) or has_decimal(_not_none(schema.value_schema))
    return False


def dump_json(value: Any, exact_decimals: bool = True) -> str:
    """Compact JSON, non-ASCII as UTF-8, Decimals as numbers with every digit."""
    if not exact_decimals:
        return _COMPACT(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise DataException(f"{value} cannot be written as a JSON number")
        return format(value, "f")
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{dump_json(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(dump_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def from_json_value(schema: Schema, value: Any) -> Any:
    """Parsed JSON (numbers with a fraction as `decimal.Decimal`) as a Connect value of `schema`."""
    if value is None:
        if schema.default_value is not None:
            return schema.default_value
        if schema.optional:
            return None
        raise DataException(f"Invalid null value for required {schema.type} field")
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        if isinstance(value, str):
            return Decimal.to_logical(schema, base64.b64decode(value))
        return decimal.Decimal(value)
    if name in _LOGICAL:
        return _LOGICAL[name].to_logical(schema, int(value))
    t = schema.type
    if t in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    if t is Type.BYTES:
        return base64.b64decode(value)
    if t is Type.STRUCT:
        struct = Struct(schema)
        for f in schema.fields:
            struct.put(f, from_json_value(f.schema, value.get(f.name)))
        return struct
    if t is Type.ARRAY:
        items = _not_none(schema.value_schema)
        return [from_json_value(items, v) for v in value]
    if t is Type.MAP:
        key_schema, value_schema = _not_none(schema.key_schema), _not_none(schema.value_schema)
        if isinstance(value, dict):
            return {k: from_json_value(value_schema, v) for k, v in value.items()}
        return {
            from_json_value(key_schema, e["key"]): from_json_value(value_schema, e["value"]) for e in value
        }
    return value


def from_json_schema(json_schema: Mapping[str, Any]) -> Schema:
    """The Connect schema of a JSON Schema (as Connect writes them; plain JSON Schemas to a reasonable
    depth: integer -> INT64, number -> FLOAT64, object with properties -> STRUCT)."""
    return _from_json(json_schema).build()


def _from_json(js: Mapping[str, Any]) -> SchemaBuilder:
    if "oneOf" in js or "anyOf" in js:
        branches = js.get("oneOf") or js.get("anyOf") or []
        others = [b for b in branches if b.get("type") != "null"]
        if len(others) != 1 or len(branches) != 2:
            raise DataException(
                "JSON Schema oneOf/anyOf other than [null, T] is not supported yet "
                f"(got {json.dumps(js)[:200]})"
            )
        return _from_json(others[0]).optional()
    t = js.get("type")
    connect_type = js.get("connect.type")
    title = js.get("title")
    if t == "integer" or (t == "number" and connect_type not in (None, "float32", "float64", "bytes")):
        factories = {
            "int8": SchemaBuilder.int8,
            "int16": SchemaBuilder.int16,
            "int32": SchemaBuilder.int32,
            "int64": SchemaBuilder.int64,
        }
        builder = factories.get(connect_type or "int64", SchemaBuilder.int64)()
    elif t == "number":
        builder = {"float32": SchemaBuilder.float32, "bytes": SchemaBuilder.bytes}.get(
            connect_type or "", SchemaBuilder.float64
        )()
    elif t == "boolean":
        builder = SchemaBuilder.bool()
    elif t == "string":
        builder = SchemaBuilder.bytes() if connect_type == "bytes" else SchemaBuilder.string()
    elif t == "array":
        items = js.get("items") or {}
        if connect_type == "map" and items.get("type") == "object":
            props = items.get("properties", {})
            builder = SchemaBuilder.map(_from_json(props["key"]).build(), _from_json(props["value"]).build())
        else:
            builder = SchemaBuilder.array(_from_json(items).build())
    elif t == "object" and (connect_type == "map" or "properties" not in js):
        values = js.get("additionalProperties")
        value_schema = (
            _from_json(values).build() if isinstance(values, dict) else SchemaBuilder.string().build()
        )
        builder = SchemaBuilder.map(SchemaBuilder.string().build(), value_schema)
    elif t == "object":
        builder = SchemaBuilder.struct()
        props = js.get("properties", {})
        ordered = sorted(props.items(), key=lambda kv: kv[1].get("connect.index", 1 << 30))
        for name, prop in ordered:
            builder.field(name, _from_json(prop).build())
    else:
        raise DataException(
            f"JSON Schema type {t!r} has no Connect equivalent (schema {json.dumps(js)[:200]})"
        )
    if title is not None:
        builder.name(title)
    if "connect.version" in js:
        builder.version(int(js["connect.version"]))
    if "description" in js:
        builder.doc(js["description"])
    builder.parameters({k: str(v) for k, v in (js.get("connect.parameters") or {}).items()})
    if js.get("default") is not None:
        builder.default_value(from_json_value(builder.build(), js["default"]))
    return builder
