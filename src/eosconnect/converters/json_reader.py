"""Kafka's JSON to Connect schemas and values, as its `JsonConverter` reads them: `JsonReader.reader(schema)`
returns a function compiled for that schema; a schema's JSON (`schema_from_json`) is parsed once per
schema text.
"""

from __future__ import annotations

import base64
import binascii
import decimal
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
from eosconnect.converters.json_format import (
    INT32_MAX,
    INT32_MIN,
    INT_BITS,
    LRU,
    TYPES_BY_NAME,
    JsonCodecConfig,
    Reader,
    json_kind,
    plain_guard,
    wrap,
)
from eosconnect.converters.json_text import (
    float32,
)

__all__ = ["JsonReader"]


class JsonReader:
    """Kafka's JSON schemas and payloads to Connect's, with a reader compiled per schema (cached)."""

    def __init__(self, config: JsonCodecConfig) -> None:
        self.config = config
        self._to_connect_cache = LRU(config.cache_size)  # schema JSON text -> (Schema, reader)

    def cached(self, key: Any) -> tuple[Schema | None, Reader] | None:
        """What `schema_from_json` gave for `key` if it is still cached."""
        return self._to_connect_cache.get(key)

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
            builder.version(wrap(version, 32))
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
                f"Invalid JSON for a {stype} value: expected {expected} but found {json_kind(node)} "
                f"{node!r:.80}"
            )

        if stype in INT_BITS:
            bits = INT_BITS[stype]

            def read_int(node: Any) -> int:
                if node.__class__ is int:
                    return node if -(1 << (bits - 1)) <= node < (1 << (bits - 1)) else wrap(node, bits)
                if isinstance(node, bool) or not isinstance(node, int | float | decimal.Decimal):
                    raise bad(node, "a number")
                return wrap(int(node), bits)  # Java's intValue()/longValue(): truncate, then wrap

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
                        f"{json_kind(node)}"
                    )
                return {k: read_value(v) for k, v in node.items()}

            return read_object

        def read_pairs(node: Any) -> dict[Any, Any]:
            if node.__class__ is not list:
                raise DataException(
                    "Maps with non-string fields should be encoded as JSON array of tuples, but found "
                    f"{json_kind(node)}"
                )
            result = {}
            for entry in node:
                if entry.__class__ is not list:
                    raise DataException(f"Found invalid map entry instead of array tuple: {json_kind(entry)}")
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
            "json_kind": json_kind,
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
            guard = plain_guard(fs, f"v{i}")
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


def _read_base64(node: Any) -> bytes:
    if node.__class__ is not str:
        raise DataException(
            f"Invalid JSON for a BYTES value: expected a base64 string but found {json_kind(node)}"
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
                f"{json_kind(node)}"
            )

        return read_decimal
    if name in (DATE_LOGICAL_NAME, TIME_LOGICAL_NAME):
        logical = Date if name == DATE_LOGICAL_NAME else Time
        to_logical = logical.to_logical

        def read_int_logical(node: Any) -> Any:
            if node.__class__ is not int or not INT32_MIN <= node <= INT32_MAX:
                raise DataException(
                    f"Invalid type for {logical.__name__}, underlying representation should be integer "
                    f"but was {json_kind(node)}"
                )
            return to_logical(schema, node)

        return read_int_logical
    if name == TIMESTAMP_LOGICAL_NAME:

        def read_timestamp(node: Any) -> Any:
            if node.__class__ is not int:
                raise DataException(
                    "Invalid type for Timestamp, underlying representation should be integral but was "
                    f"{json_kind(node)}"
                )
            return Timestamp.to_logical(schema, wrap(node, 64))

        return read_timestamp
    return None
