"""Connect values -> the plain data a registry format writes, compiled once per Connect schema.

Avro (`avro_data`) and JSON Schema (`json_schema_data`) walk a Connect value the same way: a null
takes the schema's default (or stays null where the schema is optional, else fails), Date/Time/
Timestamp become their numbers, a STRUCT a dict of its fields in order, an ARRAY a list, a MAP a dict
where its keys are required strings and a list of `{"key", "value"}` entries otherwise. Only a few
types differ by format (Decimal, BYTES, Avro's unions): each format passes those as `special`.

The walk over the schema is done once: the converters keep the compiled function per schema, so a
record (or a batch of records) pays only for its values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from eosconnect.api.data import Date, Schema, Struct, Time, Timestamp, Type
from eosconnect.api.errors import DataException

__all__ = ["Convert", "Special", "value_converter"]

Convert = Callable[[Any], Any]
#: A format's own conversion of non-null values of a schema (given the function that compiles the
#: schema's children), or None where the shared walk applies.
Special = Callable[[Schema, Callable[[Schema], Convert]], Convert | None]


def value_converter(schema: Schema, special: Special, null_message: Callable[[Schema], str]) -> Convert:
    """The function that turns a value of `schema` into the format's plain data."""

    def child(child_schema: Schema) -> Convert:
        return value_converter(child_schema, special, null_message)

    convert = _present(schema, special, child)
    default, optional = schema.default_value, schema.optional

    def nullable(value: Any) -> Any:
        if value is None:
            value = default
            if value is None:
                if optional:
                    return None
                raise DataException(null_message(schema))
        return convert(value)

    return nullable


def _identity(value: Any) -> Any:
    return value


def _last_one(from_logical: Callable[[Schema, Any], Any], schema: Schema) -> Convert:
    """A logical type's conversion that reuses its last result for the very same (immutable) value
    object: records of one poll share one timestamp object (InsertField's `timestamp.field`)."""
    last: list[Any] = [None, None]

    def convert(value: Any) -> Any:
        if value is last[0] and value is not None:
            return last[1]
        result = from_logical(schema, value)
        last[0], last[1] = value, result
        return result

    return convert


def _present(schema: Schema, special: Special, child: Callable[[Schema], Convert]) -> Convert:
    """What a non-null value of `schema` becomes."""
    own = special(schema, child)
    if own is not None:
        return own
    name = schema.name
    for logical in (Date, Time, Timestamp):
        if name == logical.LOGICAL_NAME:
            return _last_one(logical.from_logical, schema)
    t = schema.type
    if t is Type.STRUCT:
        fields = [(f.name, child(f.schema)) for f in schema.fields]
        # Fields written as they are (strings, numbers) skip their converter unless null.
        plain = [_present(f.schema, special, child) is _identity for f in schema.fields]

        def struct(value: Any) -> Any:
            if isinstance(value, Struct) and value.schema is schema:
                # By index, as `Struct.get(field)`; a null's default is the field converter's.
                values = value._values
                return {
                    name: v if (v := values[i]) is not None and plain[i] else convert(v)
                    for i, (name, convert) in enumerate(fields)
                }
            if isinstance(value, Struct | Mapping):  # a Struct of another schema: by field name
                return {name: convert(value.get(name)) for name, convert in fields}
            raise DataException(f"a STRUCT value must be a Struct, got {type(value).__name__}")

        return struct
    if t is Type.ARRAY:
        item = child(not_none(schema.value_schema))
        return lambda value: [item(v) for v in value]
    if t is Type.MAP:
        key_schema = not_none(schema.key_schema)
        key, item = child(key_schema), child(not_none(schema.value_schema))
        if key_schema.type is Type.STRING and not key_schema.optional:
            return lambda value: {k: item(v) for k, v in value.items()}
        return lambda value: [{"key": key(k), "value": item(v)} for k, v in value.items()]
    return _identity


def not_none(schema: Schema | None) -> Schema:
    if schema is None:
        raise DataException("an ARRAY or MAP schema without element schemas cannot be written to a registry")
    return schema
