"""`Struct`: a record value that carries its STRUCT schema, Kafka Connect's `Struct`.

Every `put` checks the value against the field's schema at once, so a wrong type fails in the
connector that wrote it (naming the field) rather than in a converter or a sink much later.
`validate()` checks the whole struct, required fields included; converters call it before writing.
"""

from __future__ import annotations

from typing import Any

from eosconnect.api.data.schema import Field, Schema, Type, validate_value
from eosconnect.api.errors import DataException

__all__ = ["Struct"]


class Struct:
    """The value of a STRUCT schema: one slot per field, filled with `put`, read with `get`.

    `get` returns the field's default value where the slot is empty (as Kafka's does);
    `get_without_default` does not. Structs compare equal when schema and values are equal. Like
    Kafka's, a Struct is mutable, so it is not hashable.
    """

    __slots__ = ("_values", "schema")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, schema: Schema) -> None:
        if not isinstance(schema, Schema) or schema.type is not Type.STRUCT:
            raise DataException(f"Not a struct schema: {schema}")
        self.schema = schema
        self._values: list[Any] = [None] * len(schema.fields)

    @classmethod
    def from_values(cls, schema: Schema, values: list[Any], *, validate: bool = True) -> Struct:
        """A struct holding `values` in field order: the fast way to build one per row. With
        `validate=False` the caller vouches that each value fits its field (as a converter does)."""
        if not isinstance(schema, Schema) or schema.type is not Type.STRUCT:
            raise DataException(f"Not a struct schema: {schema}")
        if len(values) != len(schema.fields):
            raise DataException(f"{len(values)} values for the {len(schema.fields)} fields of {schema}")
        struct = cls._of(schema, list(values))
        if validate:
            struct.validate()
        return struct

    @classmethod
    def _of(cls, schema: Schema, values: list[Any]) -> Struct:
        """A struct from values already known to be valid, in field order (what converters build)."""
        struct = cls.__new__(cls)
        struct.schema = schema
        struct._values = values
        return struct

    def _lookup(self, name: str) -> Field:
        field = self.schema.field(name)
        if field is None:
            known = ", ".join(f.name for f in self.schema.fields)
            raise DataException(f"{name} is not a valid field name (the schema's fields: {known})")
        return field

    def put(self, field: str | Field, value: Any) -> Struct:
        """Set a field (by name or `Field`) after validating `value` against its schema; returns self."""
        if field is None:
            raise DataException("field cannot be null.")
        if isinstance(field, str):
            field = self._lookup(field)
        validate_value(field.schema, value, field.name)
        self._values[field.index] = value
        return self

    def get(self, field: str | Field) -> Any:
        """The field's value, or its schema's default value when unset."""
        if isinstance(field, str):
            field = self._lookup(field)
        value = self._values[field.index]
        if value is None:
            return field.schema.default_value
        return value

    def get_without_default(self, name: str) -> Any:
        return self._values[self._lookup(name).index]

    def _get_checked(self, name: str, expected: Type) -> Any:
        field = self._lookup(name)
        if field.schema.type is not expected:
            raise DataException(f"Field '{name}' is not of type {expected}")
        return self._values[field.index]

    def get_int8(self, name: str) -> int | None:
        return self._get_checked(name, Type.INT8)

    def get_int16(self, name: str) -> int | None:
        return self._get_checked(name, Type.INT16)

    def get_int32(self, name: str) -> int | None:
        return self._get_checked(name, Type.INT32)

    def get_int64(self, name: str) -> int | None:
        return self._get_checked(name, Type.INT64)

    def get_float32(self, name: str) -> float | None:
        return self._get_checked(name, Type.FLOAT32)

    def get_float64(self, name: str) -> float | None:
        return self._get_checked(name, Type.FLOAT64)

    def get_boolean(self, name: str) -> bool | None:
        return self._get_checked(name, Type.BOOLEAN)

    def get_string(self, name: str) -> str | None:
        return self._get_checked(name, Type.STRING)

    def get_bytes(self, name: str) -> bytes | None:
        value = self._get_checked(name, Type.BYTES)
        return value if value is None or type(value) is bytes else bytes(value)

    def get_array(self, name: str) -> list[Any] | None:
        return self._get_checked(name, Type.ARRAY)

    def get_map(self, name: str) -> dict[Any, Any] | None:
        return self._get_checked(name, Type.MAP)

    def get_struct(self, name: str) -> Struct | None:
        return self._get_checked(name, Type.STRUCT)

    def validate(self) -> None:
        """Raise `DataException` unless every field holds a valid value (required ones set or
        defaulted)."""
        for field in self.schema.fields:
            fschema = field.schema
            value = self._values[field.index]
            if value is None and (fschema.optional or fschema.default_value is not None):
                continue
            validate_value(fschema, value, field.name)

    def to_dict(self) -> dict[str, Any]:
        """The values by field name (defaults applied, nested structs as dicts): what a schemaless
        consumer of this value would see."""
        return {f.name: _plain(self.get(f)) for f in self.schema.fields}

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Struct):
            return NotImplemented
        return self.schema == other.schema and _values_equal(self._values, other._values)

    def __repr__(self) -> str:
        parts = [
            f"{f.name}={v}" for f, v in zip(self.schema.fields, self._values, strict=True) if v is not None
        ]
        return "Struct{" + ",".join(parts) + "}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.schema, self._values))


def _rebuild(schema: Schema, values: list[Any]) -> Struct:
    return Struct._of(schema, list(values))


def _values_equal(a: list[Any], b: list[Any]) -> bool:
    # Arrays.deepEquals compares Boolean and Integer as different; Python's True == 1 does not.
    return all((type(x) is bool) == (type(y) is bool) and x == y for x, y in zip(a, b, strict=True))


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
