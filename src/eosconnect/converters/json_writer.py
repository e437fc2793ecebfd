"""Connect values to JSON text exactly as Kafka's `JsonConverter` writes them: `JsonWriter.writer(schema)`
returns a function compiled for that schema, and the schema's own JSON text is cached with it, so an
envelope costs one payload walk.
"""

from __future__ import annotations

import base64
import datetime
import decimal
from collections.abc import Callable, Mapping
from typing import Any

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
    INT_BITS,
    LRU,
    TYPE_NAMES,
    JsonCodecConfig,
    Writer,
    plain_guard,
)
from eosconnect.converters.json_text import (
    STRING_TEXTS,
    java_double_text,
    java_float_text,
    json_string,
)

__all__ = ["JsonWriter"]


class JsonWriter:
    """Schemas and values to Kafka's JSON text, with a writer compiled per schema (cached)."""

    def __init__(self, config: JsonCodecConfig) -> None:
        self.config = config
        self._from_connect_cache = LRU(config.cache_size)  # Schema -> (schema text, writer)
        self._last_compiled: tuple[Schema, tuple[str, Writer]] | None = None

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

        if stype in INT_BITS:
            low, high = -(1 << (INT_BITS[stype] - 1)), (1 << (INT_BITS[stype] - 1)) - 1

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
        guard = plain_guard(schema, var)  # the compiled reader's test for a value already plain
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
