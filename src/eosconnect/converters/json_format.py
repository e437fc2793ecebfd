"""Connect data <-> JSON text exactly as Kafka's `JsonConverter` writes and reads it.

Kafka's converter turns a schema into a JSON object (`{"type":"struct","fields":[...],
"optional":false,"name":...}`) and a value into JSON following its schema: logical types as their
encoded primitive (Decimal as base64 bytes or a plain number), bytes as base64, maps with string
keys as objects and any other map as an array of `[key, value]` pairs. Jackson writes compact JSON,
non-ASCII characters as UTF-8 and numbers as Java prints them (`1.0E7`, `1.0E-4`, float32 values
with float32 precision); this module writes the same text so a topic is byte-identical whichever
side filled it.

For speed, what a schema implies is worked out once: `JsonCodec.writer(schema)` and
`JsonCodec.reader(schema)` return functions compiled for that schema (cached per converter), and
the schema's own JSON text is cached too, so an envelope costs one payload walk.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eosconnect.api.data.builder import SchemaBuilder
from eosconnect.api.data.logical import Date, Decimal, Time, Timestamp
from eosconnect.api.data.schema import (
    DATE_LOGICAL_NAME,
    DECIMAL_LOGICAL_NAME,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
    Schema,
    Type,
)
from eosconnect.api.data.struct import Struct
from eosconnect.api.errors import DataException
from eosconnect.converters.json_text import (
    STRING_TEXTS,
    float32,
    java_double_text,
    java_float_text,
    json_string,
)

__all__ = [
    "JsonCodec",
    "JsonCodecConfig",
]

Writer = Callable[[Any], str]
Reader = Callable[[Any], Any]

#: Kafka's JSON type names (float32/float64 are "float"/"double" in JSON schemas).
TYPE_NAMES = {
    Type.BOOLEAN: "boolean",
    Type.INT8: "int8",
    Type.INT16: "int16",
    Type.INT32: "int32",
    Type.INT64: "int64",
    Type.FLOAT32: "float",
    Type.FLOAT64: "double",
    Type.BYTES: "bytes",
    Type.STRING: "string",
    Type.ARRAY: "array",
    Type.MAP: "map",
    Type.STRUCT: "struct",
}
TYPES_BY_NAME = {name: t for t, name in TYPE_NAMES.items()}

_INT_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _wrap(value: int, bits: int) -> int:
    """Java's narrowing of an integer to `bits` (what `(byte) node.intValue()` does)."""
    mask = (1 << bits) - 1
    value &= mask
    return value - (1 << bits) if value >> (bits - 1) else value


def _json_kind(node: Any) -> str:
    """Jackson's node type names, for error messages."""
    if node is None:
        return "NULL"
    if isinstance(node, bool):
        return "BOOLEAN"
    if isinstance(node, int | float | decimal.Decimal):
        return "NUMBER"
    if isinstance(node, str):
        return "STRING"
    if isinstance(node, list):
        return "ARRAY"
    if isinstance(node, dict):
        return "OBJECT"
    return type(node).__name__


# --- configuration and cache -----------------------------------------------------------------------


@dataclass(frozen=True)
class JsonCodecConfig:
    """The JsonConverter settings that change the JSON (`decimal.format`, `replace.null.with.default`)."""

    decimal_numeric: bool = False
    replace_null_with_default: bool = True
    cache_size: int = 1000


class _LRU:
    """Kafka's `LRUCache` of `schemas.cache.size` entries (0 disables caching)."""

    __slots__ = ("_data", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        if self._size <= 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._size:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class JsonCodec:
    """Schemas and values to and from Kafka's JSON, with per-schema compiled writers and readers."""

    def __init__(self, config: JsonCodecConfig | None = None) -> None:
        self.config = config or JsonCodecConfig()
        self._from_connect_cache = _LRU(self.config.cache_size)  # Schema -> (schema text, writer)
        self._to_connect_cache = _LRU(self.config.cache_size)  # schema JSON text -> (Schema, reader)
        self._last_compiled: tuple[Schema, tuple[str, Writer]] | None = None

    # -- writing --

    def schema_text(self, schema: Schema | None) -> str:
        """The JSON of a schema as Kafka writes it in an envelope (`asJsonSchema`)."""
        return "null" if schema is None else self._compiled(schema)[0]

    def writer(self, schema: Schema | None) -> Writer:
        """A function writing values of `schema` (None: schemaless) as JSON text."""
        return self._write_schemaless if schema is None else self._compiled(schema)[1]

    def _compiled(self, schema: Schema) -> tuple[str, Writer]:
        last = self._last_compiled
        if last is not None and last[0] is schema:  # a stream of one schema object: no hashing at all
            return last[1]
        cached = self._from_connect_cache.get(schema)
        if cached is None:
            writer = self._compile_writer(schema)
            cached = (self._schema_json(schema), writer)
            self._from_connect_cache.put(schema, cached)
        self._last_compiled = (schema, cached)
        return cached

    def _schema_json(self, schema: Schema) -> str:
        parts = ['{"type":"', TYPE_NAMES[schema.type], '"']
        stype = schema.type
        if stype is Type.ARRAY:
            items = schema._value_schema
            parts.append(',"items":' + ("null" if items is None else self._schema_json(items)))
        elif stype is Type.MAP:
            keys, values = schema._key_schema, schema._value_schema
            parts.append(',"keys":' + ("null" if keys is None else self._schema_json(keys)))
            parts.append(',"values":' + ("null" if values is None else self._schema_json(values)))
        elif stype is Type.STRUCT:
            fields = [
                self._schema_json(f.schema)[:-1] + ',"field":' + json_string(f.name) + "}"
                for f in schema.fields
            ]
            parts.append(',"fields":[' + ",".join(fields) + "]")
        parts.append(',"optional":' + ("true" if schema.optional else "false"))
        if schema.name is not None:
            parts.append(',"name":' + json_string(schema.name))
        if schema.version is not None:
            parts.append(f',"version":{schema.version}')
        if schema.doc is not None:
            parts.append(',"doc":' + json_string(schema.doc))
        if schema.parameters is not None:
            params = ",".join(json_string(k) + ":" + json_string(v) for k, v in schema.parameters.items())
            parts.append(',"parameters":{' + params + "}")
        if schema.default_value is not None:
            parts.append(',"default":' + self._compile_writer(schema)(schema.default_value))
        parts.append("}")
        return "".join(parts)

    def _compile_writer(self, schema: Schema) -> Writer:
        inner = self._inner_writer(schema)
        default = schema.default_value
        if default is not None and self.config.replace_null_with_default:
            default_text = inner(default)

            def write_or_default(value: Any) -> str:
                return default_text if value is None else inner(value)

            return write_or_default
        if schema.optional:
            if getattr(inner, "writes_null", False):
                return inner  # a primitive's writer that writes None itself: one call per value, not two

            def write_optional(value: Any) -> str:
                return "null" if value is None else inner(value)

            return write_optional

        def write_required(value: Any) -> str:
            if value is None:
                raise DataException(
                    "Conversion error: null value for field that is required and has no default value"
                )
            return inner(value)

        return write_required

    def _inner_writer(self, schema: Schema) -> Writer:
        name = schema.name
        if name is not None:
            logical = self._logical_writer(schema, name)
            if logical is not None:
                return logical
        stype = schema.type
        what = str(stype)
        # The commonest fields (ints and strings) of an optional schema write None themselves
        # (`writes_null`): a CDC event has a dozen optional ones, so that is a Python call less each.
        nullable = schema.optional and schema.default_value is None

        def bad(value: Any) -> DataException:
            return DataException(f"Invalid type for {what}: {type(value).__name__} {value!r:.80}")

        if stype in _INT_BITS:
            low, high = -(1 << (_INT_BITS[stype] - 1)), (1 << (_INT_BITS[stype] - 1)) - 1

            def write_int(value: Any) -> str:
                if value.__class__ is not int:
                    if value is None and nullable:
                        return "null"
                    if isinstance(value, bool) or not isinstance(value, int):
                        raise bad(value)
                if not low <= value <= high:
                    raise DataException(f"Invalid value {value} for {what}: out of range ({low}..{high})")
                return str(value)

            write_int.writes_null = nullable  # type: ignore[attr-defined]
            return write_int
        if stype is Type.FLOAT64 or stype is Type.FLOAT32:
            to_text = java_double_text if stype is Type.FLOAT64 else java_float_text

            def write_float(value: Any) -> str:
                if isinstance(value, bool) or not isinstance(value, float | int):
                    raise bad(value)
                return to_text(float(value))

            return write_float
        if stype is Type.BOOLEAN:

            def write_bool(value: Any) -> str:
                if value is True:
                    return "true"
                if value is False:
                    return "false"
                raise bad(value)

            return write_bool
        if stype is Type.STRING:

            def write_string(value: Any) -> str:
                if value.__class__ is not str:
                    if value is None and nullable:
                        return "null"
                    if not isinstance(value, str):
                        raise bad(value)
                return json_string(value)

            write_string.writes_null = nullable  # type: ignore[attr-defined]
            return write_string
        if stype is Type.BYTES:

            def write_bytes(value: Any) -> str:
                if not isinstance(value, bytes | bytearray | memoryview):
                    raise bad(value)
                return '"' + base64.b64encode(value).decode("ascii") + '"'

            return write_bytes
        if stype is Type.ARRAY:
            items = schema._value_schema
            element = self._write_schemaless if items is None else self._compile_writer(items)

            def write_array(value: Any) -> str:
                if not isinstance(value, list | tuple):
                    raise bad(value)
                return "[" + ",".join([element(v) for v in value]) + "]"

            return write_array
        if stype is Type.MAP:
            return self._map_writer(schema, bad)
        return self._struct_writer(schema)

    def _map_writer(self, schema: Schema, bad: Callable[[Any], DataException]) -> Writer:
        key_schema, value_schema = schema._key_schema, schema._value_schema
        write_key = self._write_schemaless if key_schema is None else self._compile_writer(key_schema)
        write_value = self._write_schemaless if value_schema is None else self._compile_writer(value_schema)
        if key_schema is not None and key_schema.type is Type.STRING:

            def write_object(value: Any) -> str:
                if not isinstance(value, Mapping):
                    raise bad(value)
                items = []
                for k, v in value.items():
                    key_text = write_key(k)
                    items.append(
                        (key_text if key_text.startswith('"') else '"' + key_text + '"')
                        + ":"
                        + write_value(v)
                    )
                return "{" + ",".join(items) + "}"

            return write_object

        def write_pairs(value: Any) -> str:
            if not isinstance(value, Mapping):
                raise bad(value)
            return (
                "["
                + ",".join(["[" + write_key(k) + "," + write_value(v) + "]" for k, v in value.items()])
                + "]"
            )

        return write_pairs

    def _struct_writer(self, schema: Schema) -> Writer:
        """A writer of this Struct schema's values, compiled into one function that builds the object
        in one f-string: a field whose value is already plain (an int in range, a str, a bool, or None
        for an optional field) is written inline, any other goes through its field's writer
        (`_compile_writer`), so behaviour and errors are that writer's. A CDC event is some thirty
        fields; a call and a list entry per field cost more than the text itself."""
        namespace: dict[str, Any] = {
            "DataException": DataException,
            "Struct": Struct,
            "schema": schema,
            "equal": [schema],  # the last equal schema object seen: a deep comparison once, not per value
            "string_text": STRING_TEXTS,
            "NULL": "null",
            "TRUE": "true",
            "FALSE": "false",
        }
        parts = []
        for i, f in enumerate(schema.fields):
            namespace[f"p{i}"] = ("," if i else "") + json_string(f.name) + ":"
            namespace[f"w{i}"] = self._compile_writer(f.schema)
            parts.append(f"{{p{i}}}{{{self._inline_field(f.schema, f'v{i}', f'w{i}')}}}")
        values = ", ".join(f"v{i}" for i in range(len(schema.fields)))
        unpack = f"    {values}, = value._values\n" if schema.fields else ""
        source = f"""def write_struct(value):
    if value.__class__ is not Struct and not isinstance(value, Struct):
        raise DataException(f"Invalid type for STRUCT: {{type(value).__name__}} {{value!r:.80}}")
    if value.schema is not schema and value.schema is not equal[0]:
        if value.schema != schema:
            raise DataException(f"Mismatching schema: the Struct's schema is not {{schema!r:.200}}")
        equal[0] = value.schema
{unpack}    return f"{{{{{"".join(parts)}}}}}"
"""
        exec(compile(source, f"<JsonConverter writer of {schema}>", "exec"), namespace)
        write_struct: Writer = namespace["write_struct"]
        return write_struct

    def _inline_field(self, schema: Schema, var: str, writer: str) -> str:
        """The expression writing `var` in a compiled struct writer: inline where the value is plain,
        else a call of the field's `writer` (which also raises for a wrong value)."""
        guard = _plain_guard(schema, var)  # the compiled reader's test for a value already plain
        if guard is None:
            expression = f"{writer}({var})"
        else:
            text = {Type.STRING: f"string_text[{var}]", Type.BOOLEAN: f"(TRUE if {var} is True else FALSE)"}
            expression = f"({text.get(schema.type, f'str({var})')} if {guard} else {writer}({var}))"
        replaces_null = schema.default_value is not None and self.config.replace_null_with_default
        if schema.optional and not replaces_null:
            return f"NULL if {var} is None else {expression}"
        return expression

    def _logical_writer(self, schema: Schema, name: str) -> Writer | None:
        if name == DECIMAL_LOGICAL_NAME:
            numeric = self.config.decimal_numeric

            def write_decimal(value: Any) -> str:
                if not isinstance(value, decimal.Decimal):
                    raise DataException(
                        f"Invalid type for Decimal, expected decimal.Decimal but was {type(value).__name__}"
                    )
                if numeric:
                    if not value.is_finite():
                        raise DataException(f"Decimal value {value} has no JSON number form")
                    return str(value)
                return '"' + base64.b64encode(Decimal.from_logical(schema, value)).decode("ascii") + '"'

            return write_decimal
        logicals: dict[str, type[Date] | type[Time] | type[Timestamp]] = {
            DATE_LOGICAL_NAME: Date,
            TIME_LOGICAL_NAME: Time,
            TIMESTAMP_LOGICAL_NAME: Timestamp,
        }
        logical = logicals.get(name) if name is not None else None
        if logical is None:
            return None
        expected = {Date: "date", Time: "time", Timestamp: "datetime"}[logical]
        from_logical: Callable[[Schema, Any], int] = logical.from_logical

        cls = {"date": datetime.date, "time": datetime.time, "datetime": datetime.datetime}[expected]

        last: list[Any] = [None, ""]  # the last value and its text: records of a poll share a timestamp

        def write_temporal(value: Any) -> str:
            if value is last[0]:
                return last[1]
            if not isinstance(value, cls) or (cls is datetime.date and isinstance(value, datetime.datetime)):
                raise DataException(
                    f"Invalid type for {logical.__name__}, expected datetime.{expected} but was "
                    f"{type(value).__name__}"
                )
            text = str(from_logical(schema, value))
            last[0], last[1] = value, text
            return text

        return write_temporal

    def _write_schemaless(self, value: Any) -> str:
        """A value without a schema, by its Python type (`ConnectSchema.schemaType`)."""
        if value is None:
            return "null"
        cls = value.__class__
        if cls is str:
            return json_string(value)
        if cls is bool:
            return "true" if value else "false"
        if cls is int:
            return str(value)
        if cls is float:
            return java_double_text(value)
        if isinstance(value, Struct):
            return self.writer(value.schema)(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return '"' + base64.b64encode(value).decode("ascii") + '"'
        if isinstance(value, list | tuple):
            return "[" + ",".join([self._write_schemaless(v) for v in value]) + "]"
        if isinstance(value, Mapping):
            if all(isinstance(k, str) for k in value):
                return (
                    "{"
                    + ",".join([json_string(k) + ":" + self._write_schemaless(v) for k, v in value.items()])
                    + "}"
                )
            return (
                "["
                + ",".join(
                    [
                        "[" + self._write_schemaless(k) + "," + self._write_schemaless(v) + "]"
                        for k, v in value.items()
                    ]
                )
                + "]"
            )
        if isinstance(value, str):
            return json_string(str(value))
        if isinstance(value, int):
            return str(int(value))
        if isinstance(value, float):
            return java_double_text(float(value))
        raise DataException(f"Python type {cls.__name__} does not have corresponding schema type.")

    # -- reading --

    def schema_from_json(self, node: Any, key: Any = None) -> tuple[Schema | None, Reader]:
        """The schema a parsed JSON schema stands for, and a reader for its payloads (`asConnectSchema`).
        `key` (hashable, e.g. the schema's JSON text) caches the result."""
        if node is None:
            return None, self.read_schemaless
        if key is not None:
            cached = self._to_connect_cache.get(key)
            if cached is not None:
                return cached
        schema = self._parse_schema(node)
        result = (schema, self._compile_reader(schema))
        if key is not None:
            self._to_connect_cache.put(key, result)
        return result

    def reader(self, schema: Schema | None) -> Reader:
        return self.read_schemaless if schema is None else self._compile_reader(schema)

    def _parse_schema(self, node: Any) -> Schema:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise DataException("Schema must contain 'type' field")
        type_name = node["type"]
        stype = TYPES_BY_NAME.get(type_name)
        if stype is None:
            raise DataException(f"Unknown schema type: {type_name}")
        if stype is Type.ARRAY:
            items = node.get("items")
            if items is None:
                raise DataException("Array schema did not specify the element type")
            builder = SchemaBuilder.array(self._parse_schema(items))
        elif stype is Type.MAP:
            if "keys" not in node:
                raise DataException("Map schema did not specify the key type")
            if "values" not in node:
                raise DataException("Map schema did not specify the value type")
            keys, values = node["keys"], node["values"]
            builder = SchemaBuilder.map(
                None if keys is None else self._parse_schema(keys),  # type: ignore[arg-type]
                None if values is None else self._parse_schema(values),  # type: ignore[arg-type]
            )
        elif stype is Type.STRUCT:
            builder = SchemaBuilder.struct()
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise DataException('Struct schema\'s "fields" argument is not an array.')
            for field in fields:
                field_name = field.get("field") if isinstance(field, dict) else None
                if not isinstance(field_name, str):
                    raise DataException("Struct schema's field name not specified properly")
                builder.field(field_name, self._parse_schema(field))
        else:
            builder = SchemaBuilder(stype)
        if node.get("optional") is True:
            builder.optional()
        else:
            builder.required()
        name = node.get("name")
        if isinstance(name, str):
            builder.name(name)
        version = node.get("version")
        if isinstance(version, int) and not isinstance(version, bool):
            builder.version(_wrap(version, 32))
        doc = node.get("doc")
        if isinstance(doc, str):
            builder.doc(doc)
        params = node.get("parameters")
        if isinstance(params, dict):
            for k, v in params.items():
                if not isinstance(v, str):
                    raise DataException("Schema parameters must have string values.")
                builder.parameter(k, v)
        if "default" in node:
            builder.default_value(self._compile_reader(builder.build())(node["default"]))
        return builder.build()

    def _compile_reader(self, schema: Schema) -> Reader:
        inner = self._inner_reader(schema)
        default = schema.default_value
        replace = default is not None and self.config.replace_null_with_default
        optional = schema.optional
        what = str(schema.type)

        def read(node: Any) -> Any:
            if node is None:
                if replace:
                    return default
                if optional:
                    return None
                raise DataException(f"Invalid null value for required {what} field")
            return inner(node)

        return read

    def _inner_reader(self, schema: Schema) -> Reader:
        name = schema.name
        if name is not None:
            logical = _logical_reader(schema, name)
            if logical is not None:
                return logical
        stype = schema.type

        def bad(node: Any, expected: str) -> DataException:
            return DataException(
                f"Invalid JSON for a {stype} value: expected {expected} but found {_json_kind(node)} "
                f"{node!r:.80}"
            )

        if stype in _INT_BITS:
            bits = _INT_BITS[stype]

            def read_int(node: Any) -> int:
                if node.__class__ is int:
                    return node if -(1 << (bits - 1)) <= node < (1 << (bits - 1)) else _wrap(node, bits)
                if isinstance(node, bool) or not isinstance(node, int | float | decimal.Decimal):
                    raise bad(node, "a number")
                return _wrap(int(node), bits)  # Java's intValue()/longValue(): truncate, then wrap

            return read_int
        if stype is Type.FLOAT64 or stype is Type.FLOAT32:
            narrow = float32 if stype is Type.FLOAT32 else float

            def read_float(node: Any) -> float:
                cls = node.__class__
                if cls is decimal.Decimal or cls is float or cls is int:  # what JSON parsing gives
                    return narrow(float(node)) or 0.0
                if isinstance(node, bool):
                    raise bad(node, "a number")
                if isinstance(node, int | float | decimal.Decimal):
                    return narrow(float(node)) or 0.0  # -0.0 reads as 0.0, as through Java's BigDecimal
                if node in ("NaN", "Infinity", "-Infinity"):  # how Jackson writes non-finite numbers
                    return narrow(float(node))
                raise bad(node, "a number")

            return read_float
        if stype is Type.BOOLEAN:

            def read_bool(node: Any) -> bool:
                if node is True or node is False:
                    return node
                raise bad(node, "true or false")

            return read_bool
        if stype is Type.STRING:

            def read_string(node: Any) -> str:
                if node.__class__ is str:
                    return node
                raise bad(node, "a string")

            return read_string
        if stype is Type.BYTES:
            return _read_base64
        if stype is Type.ARRAY:
            items = schema._value_schema
            element = self.read_schemaless if items is None else self._compile_reader(items)

            def read_array(node: Any) -> list[Any]:
                if node.__class__ is not list:
                    raise bad(node, "an array")
                return [element(v) for v in node]

            return read_array
        if stype is Type.MAP:
            return self._map_reader(schema)
        return self._struct_reader(schema)

    def _map_reader(self, schema: Schema) -> Reader:
        key_schema, value_schema = schema._key_schema, schema._value_schema
        read_key = self.read_schemaless if key_schema is None else self._compile_reader(key_schema)
        read_value = self.read_schemaless if value_schema is None else self._compile_reader(value_schema)
        if key_schema is None or key_schema.type is Type.STRING:

            def read_object(node: Any) -> dict[Any, Any]:
                if node.__class__ is not dict:
                    raise DataException(
                        "Maps with string fields should be encoded as JSON objects, but found "
                        f"{_json_kind(node)}"
                    )
                return {k: read_value(v) for k, v in node.items()}

            return read_object

        def read_pairs(node: Any) -> dict[Any, Any]:
            if node.__class__ is not list:
                raise DataException(
                    "Maps with non-string fields should be encoded as JSON array of tuples, but found "
                    f"{_json_kind(node)}"
                )
            result = {}
            for entry in node:
                if entry.__class__ is not list:
                    raise DataException(
                        f"Found invalid map entry instead of array tuple: {_json_kind(entry)}"
                    )
                if len(entry) != 2:
                    raise DataException(f"Found invalid map entry, expected length 2 but found :{len(entry)}")
                result[read_key(entry[0])] = read_value(entry[1])
            return result

        return read_pairs

    def _struct_reader(self, schema: Schema) -> Reader:
        """A reader of this Struct schema's payloads, compiled into one function with straight-line
        code per field: no loop, and no call for a value that is already what its reader would
        return (`_plain_guard`: an int in range, a str, a bool). It runs for every record, where a
        loop with two calls per field cost more than parsing the JSON. Behaviour, errors included,
        is `_compile_reader`'s for each field."""
        replace_nulls = self.config.replace_null_with_default
        namespace: dict[str, Any] = {
            "DataException": DataException,
            "Struct": Struct,
            "new_struct": Struct.__new__,
            "schema": schema,
            "json_kind": _json_kind,
            "null_field": _null_field,
            "in_field": _in_field,
        }
        lines = []
        for i, f in enumerate(schema.fields):
            fs = f.schema
            namespace[f"n{i}"], namespace[f"r{i}"] = f.name, self._inner_reader(fs)
            namespace[f"d{i}"], namespace[f"w{i}"] = fs.default_value, str(fs.type)
            if fs.default_value is not None and replace_nulls:
                on_null = f"v{i} = d{i}"
            elif fs.optional:
                on_null = "pass"
            else:
                on_null = f"raise null_field(w{i}, n{i})"
            guard = _plain_guard(fs, f"v{i}")
            lines.append(
                f"""    v{i} = get(n{i})
    if v{i} is None:
        {on_null}
    elif {"not (" + guard + ")" if guard else "True"}:
        try:
            v{i} = r{i}(v{i})
        except DataException as exc:
            raise in_field(exc, n{i}) from None
"""
            )
        values = ", ".join(f"v{i}" for i in range(len(schema.fields)))
        source = f"""def read_struct(node):
    if node.__class__ is not dict:
        raise DataException(f"Structs should be encoded as JSON objects, but found {{json_kind(node)}}")
    get = node.get
{"".join(lines)}    struct = new_struct(Struct)
    struct.schema = schema
    struct._values = [{values}]
    return struct
"""
        exec(compile(source, f"<JsonConverter reader of {schema}>", "exec"), namespace)
        read_struct: Reader = namespace["read_struct"]
        return read_struct

    def read_schemaless(self, node: Any) -> Any:
        """A payload without a schema: JSON types as Python's (numbers with a fraction as float)."""
        cls = node.__class__
        if cls is decimal.Decimal:
            return float(node) or 0.0  # Java reads fractions as BigDecimal, which has no -0.0
        if cls is list:
            return [self.read_schemaless(v) for v in node]
        if cls is dict:
            return {k: self.read_schemaless(v) for k, v in node.items()}
        return node


def _null_field(what: str, name: str) -> DataException:
    return DataException(f'Invalid null value for required {what} field (field "{name}")')


def _in_field(exc: DataException, name: str) -> DataException:
    return DataException(f'{exc} (field "{name}")')


def _plain_guard(schema: Schema, var: str) -> str | None:
    """A Python condition under which `var` is a plain value of this schema (an int in range, a str,
    a bool): the generated struct reader takes such a node as it is, the generated struct writer
    writes it inline; None if no value of the schema is plain."""
    if schema.name is not None:
        return None  # logical types convert
    if schema.type in _INT_BITS:
        bits = _INT_BITS[schema.type]
        return f"{var}.__class__ is int and {-(1 << (bits - 1))} <= {var} < {1 << (bits - 1)}"
    if schema.type is Type.STRING:
        return f"{var}.__class__ is str"
    if schema.type is Type.BOOLEAN:
        return f"{var} is True or {var} is False"
    return None


def _read_base64(node: Any) -> bytes:
    if node.__class__ is not str:
        raise DataException(
            f"Invalid JSON for a BYTES value: expected a base64 string but found {_json_kind(node)}"
        )
    try:
        return base64.b64decode(node, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DataException(f"Invalid bytes field: {exc}") from None


def _logical_reader(schema: Schema, name: str) -> Reader | None:
    if name == DECIMAL_LOGICAL_NAME:
        scale = Decimal.scale(schema)

        def read_decimal(node: Any) -> decimal.Decimal:
            cls = node.__class__
            if cls is decimal.Decimal:
                return node
            if cls is int:
                return decimal.Decimal(node)
            if cls is float:
                return decimal.Decimal(repr(node))
            if cls is str:
                try:
                    raw = base64.b64decode(node, validate=True)
                except (binascii.Error, ValueError) as exc:
                    raise DataException(f"Invalid bytes for Decimal field: {exc}") from None
                if not raw:
                    raise DataException("Invalid bytes for Decimal field: empty")
                return Decimal.from_unscaled(int.from_bytes(raw, "big", signed=True), scale)
            raise DataException(
                "Invalid type for Decimal, underlying representation should be numeric or bytes but was "
                f"{_json_kind(node)}"
            )

        return read_decimal
    if name in (DATE_LOGICAL_NAME, TIME_LOGICAL_NAME):
        logical = Date if name == DATE_LOGICAL_NAME else Time
        to_logical = logical.to_logical

        def read_int_logical(node: Any) -> Any:
            if node.__class__ is not int or not _INT32_MIN <= node <= _INT32_MAX:
                raise DataException(
                    f"Invalid type for {logical.__name__}, underlying representation should be integer "
                    f"but was {_json_kind(node)}"
                )
            return to_logical(schema, node)

        return read_int_logical
    if name == TIMESTAMP_LOGICAL_NAME:

        def read_timestamp(node: Any) -> Any:
            if node.__class__ is not int:
                raise DataException(
                    "Invalid type for Timestamp, underlying representation should be integral but was "
                    f"{_json_kind(node)}"
                )
            return Timestamp.to_logical(schema, _wrap(node, 64))

        return read_timestamp
    return None
