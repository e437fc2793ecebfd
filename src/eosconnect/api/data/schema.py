"""`Schema` and `Field`: Kafka Connect's `org.apache.kafka.connect.data` in Python.

A schema describes a key or value so that converters can write it in a typed format (JSON with a
schema envelope, Avro, Protobuf) and sinks can create tables from it. The model, the names and the
rules are Kafka's, so a schema built here serialises exactly as Java Connect's does:

- `Schema` is Kafka's `ConnectSchema`: immutable, compared by value, hashable.
- `SchemaBuilder` (builder.py) is the fluent way to make one
  (`SchemaBuilder.struct().name("x").field(...)`), with Kafka's "each property may be set once" checks.
- `validate_value` is `ConnectSchema.validateValue`: which Python values a schema accepts.

Python has one `int` and one `float`, so where Java checks the boxed class (`Integer` for INT32),
we check the range of the integer type (INT8 is -128..127) and accept an `int` where a float is
expected. Logical types (see `logical.py`) take their Python types: `decimal.Decimal` for Decimal,
`datetime.date` for Date, `datetime.time` for Time and `datetime.datetime` for Timestamp.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from eosconnect.api.errors import DataException

if TYPE_CHECKING:
    from eosconnect.api.data.struct import Struct

__all__ = [
    "BOOLEAN_SCHEMA",
    "BYTES_SCHEMA",
    "FLOAT32_SCHEMA",
    "FLOAT64_SCHEMA",
    "INT8_SCHEMA",
    "INT16_SCHEMA",
    "INT32_SCHEMA",
    "INT64_SCHEMA",
    "OPTIONAL_BOOLEAN_SCHEMA",
    "OPTIONAL_BYTES_SCHEMA",
    "OPTIONAL_FLOAT32_SCHEMA",
    "OPTIONAL_FLOAT64_SCHEMA",
    "OPTIONAL_INT8_SCHEMA",
    "OPTIONAL_INT16_SCHEMA",
    "OPTIONAL_INT32_SCHEMA",
    "OPTIONAL_INT64_SCHEMA",
    "OPTIONAL_STRING_SCHEMA",
    "STRING_SCHEMA",
    "ConnectSchema",
    "Field",
    "Schema",
    "SchemaAndValue",
    "SchemaBuilderException",
    "Type",
    "field_changes",
    "validate_value",
]


class SchemaBuilderException(DataException):
    """A `SchemaBuilder` call that Kafka's builder refuses (a property set twice, a bad default)."""


class Type(Enum):
    """Kafka's `Schema.Type`; the value is the lower-case name JSON schemas use (`"int32"`)."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in _COMPOUND

    def __str__(self) -> str:  # Kafka's messages print the enum name: "schema type: INT32"
        return self.name


_COMPOUND = frozenset({Type.ARRAY, Type.MAP, Type.STRUCT})

_INT_RANGES = {
    Type.INT8: (-(2**7), 2**7 - 1),
    Type.INT16: (-(2**15), 2**15 - 1),
    Type.INT32: (-(2**31), 2**31 - 1),
    Type.INT64: (-(2**63), 2**63 - 1),
}

DECIMAL_LOGICAL_NAME = "org.apache.kafka.connect.data.Decimal"
DATE_LOGICAL_NAME = "org.apache.kafka.connect.data.Date"
TIME_LOGICAL_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_LOGICAL_NAME = "org.apache.kafka.connect.data.Timestamp"

#: The Python classes that stand for each logical type (Kafka's LOGICAL_TYPE_CLASSES).
_LOGICAL_CLASSES: dict[str, tuple[type, ...]] = {
    DECIMAL_LOGICAL_NAME: (decimal.Decimal,),
    DATE_LOGICAL_NAME: (datetime.date,),
    TIME_LOGICAL_NAME: (datetime.time,),
    TIMESTAMP_LOGICAL_NAME: (datetime.datetime,),
}


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a STRUCT schema: its name, its position and its schema."""

    name: str
    index: int
    schema: Schema

    def __str__(self) -> str:
        return f"Field{{name={self.name}, index={self.index}, schema={self.schema}}}"


def _freeze(value: Any) -> Any:
    """A hashable stand-in for a default value (lists and dicts are allowed as defaults)."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return frozenset((_freeze(k), _freeze(v)) for k, v in value.items())
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


#: `Type` under a second name, for annotations inside `Schema`, whose `Schema.Type` (Kafka's spelling)
#: hides the enum there.
_SchemaType = Type


class Schema:
    """An immutable schema, Kafka's `ConnectSchema`; build one with `SchemaBuilder`.

    `fields`/`field()` exist for STRUCT, `key_schema` for MAP and `value_schema` for MAP and ARRAY;
    asking another type for them raises `DataException`, as Kafka does. `parameters` is None or a
    read-only map (Kafka never stores an empty one).
    """

    __slots__ = (
        "_fields",
        "_fields_by_name",
        "_hash",
        "_key_schema",
        "_value_schema",
        "default_value",
        "doc",
        "name",
        "optional",
        "parameters",
        "type",
        "version",
    )

    # The predefined schemas and the Type enum, as Kafka's `Schema.INT32_SCHEMA`, `Schema.Type`.
    Type: ClassVar[type[Type]]
    INT8_SCHEMA: ClassVar[Schema]
    INT16_SCHEMA: ClassVar[Schema]
    INT32_SCHEMA: ClassVar[Schema]
    INT64_SCHEMA: ClassVar[Schema]
    FLOAT32_SCHEMA: ClassVar[Schema]
    FLOAT64_SCHEMA: ClassVar[Schema]
    BOOLEAN_SCHEMA: ClassVar[Schema]
    STRING_SCHEMA: ClassVar[Schema]
    BYTES_SCHEMA: ClassVar[Schema]
    OPTIONAL_INT8_SCHEMA: ClassVar[Schema]
    OPTIONAL_INT16_SCHEMA: ClassVar[Schema]
    OPTIONAL_INT32_SCHEMA: ClassVar[Schema]
    OPTIONAL_INT64_SCHEMA: ClassVar[Schema]
    OPTIONAL_FLOAT32_SCHEMA: ClassVar[Schema]
    OPTIONAL_FLOAT64_SCHEMA: ClassVar[Schema]
    OPTIONAL_BOOLEAN_SCHEMA: ClassVar[Schema]
    OPTIONAL_STRING_SCHEMA: ClassVar[Schema]
    OPTIONAL_BYTES_SCHEMA: ClassVar[Schema]

    type: _SchemaType
    optional: bool
    default_value: Any
    name: str | None
    version: int | None
    doc: str | None
    parameters: Mapping[str, str] | None
    _fields: tuple[Field, ...] | None
    _fields_by_name: dict[str, Field] | None
    _key_schema: Schema | None
    _value_schema: Schema | None
    _hash: int | None

    def __init__(
        self,
        type: _SchemaType,
        optional: bool = False,
        default_value: Any = None,
        name: str | None = None,
        version: int | None = None,
        doc: str | None = None,
        parameters: Mapping[str, str] | None = None,
        fields: list[Field] | tuple[Field, ...] | None = None,
        key_schema: Schema | None = None,
        value_schema: Schema | None = None,
    ) -> None:
        if not isinstance(type, Type):
            raise DataException(f"schema type must be an eosconnect.api.Type, got {type!r}")
        setattr_ = object.__setattr__
        setattr_(self, "type", type)
        setattr_(self, "optional", bool(optional))
        setattr_(self, "default_value", default_value)
        setattr_(self, "name", name)
        setattr_(self, "version", version)
        setattr_(self, "doc", doc)
        setattr_(self, "parameters", None if parameters is None else MappingProxyType(dict(parameters)))
        if type is Type.STRUCT:
            field_tuple = tuple(fields or ())
            setattr_(self, "_fields", field_tuple)
            setattr_(self, "_fields_by_name", {f.name: f for f in field_tuple})
        else:
            setattr_(self, "_fields", None)
            setattr_(self, "_fields_by_name", None)
        setattr_(self, "_key_schema", key_schema)
        setattr_(self, "_value_schema", value_schema)
        setattr_(self, "_hash", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Schema is immutable; build a new one with SchemaBuilder (tried to set {name})")

    def __reduce__(self) -> tuple[Any, ...]:
        params = None if self.parameters is None else dict(self.parameters)
        return (
            Schema,
            (
                self.type,
                self.optional,
                self.default_value,
                self.name,
                self.version,
                self.doc,
                params,
                self._fields,
                self._key_schema,
                self._value_schema,
            ),
        )

    @property
    def fields(self) -> tuple[Field, ...]:
        """The fields of a STRUCT, in order."""
        if self._fields is None:
            raise DataException(f"Cannot list fields on non-struct type {self.type}")
        return self._fields

    def field(self, name: str) -> Field | None:
        """The STRUCT field called `name`, or None."""
        if self._fields_by_name is None:
            raise DataException(f"Cannot look up fields on non-struct type {self.type}")
        return self._fields_by_name.get(name)

    @property
    def key_schema(self) -> Schema | None:
        if self.type is not Type.MAP:
            raise DataException(f"Cannot look up key schema on non-map type {self.type}")
        return self._key_schema

    @property
    def value_schema(self) -> Schema | None:
        if self.type is not Type.MAP and self.type is not Type.ARRAY:
            raise DataException(f"Cannot look up value schema on non-array and non-map type {self.type}")
        return self._value_schema

    def validate_value(self, value: Any) -> None:
        """Raise `DataException` unless `value` fits this schema (`ConnectSchema.validateValue`)."""
        validate_value(self, value)

    @property
    def schema(self) -> Schema:
        """This schema (Kafka's `Schema.schema()`; a `SchemaBuilder` answers with what it builds)."""
        return self

    def _key(self) -> tuple[Any, ...]:
        return (
            self.type,
            self.optional,
            self.version,
            self.name,
            self.doc,
            self._fields,
            self._key_schema,
            self._value_schema,
            None if self.parameters is None else dict(self.parameters),
        )

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not Schema:
            return NotImplemented
        if hash(self) != hash(other):
            return False
        return self._key() == other._key() and _default_equal(self.default_value, other.default_value)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            params = None if self.parameters is None else frozenset(self.parameters.items())
            h = hash(
                (
                    self.type,
                    self.optional,
                    _freeze(self.default_value),
                    self._fields,
                    self._key_schema,
                    self._value_schema,
                    self.name,
                    self.version,
                    self.doc,
                    params,
                )
            )
            object.__setattr__(self, "_hash", h)
        return h

    def __str__(self) -> str:
        return f"Schema{{{self.name}:{self.type}}}" if self.name is not None else f"Schema{{{self.type}}}"

    def __repr__(self) -> str:
        parts = [f"type={self.type}"]
        if self.optional:
            parts.append("optional")
        for attr in ("name", "version", "doc", "default_value", "parameters"):
            val = getattr(self, attr)
            if val is not None:
                parts.append(f"{attr}={dict(val) if attr == 'parameters' else val!r}")
        if self._fields is not None:
            parts.append("fields=[" + ", ".join(f"{f.name}: {f.schema!r}" for f in self._fields) + "]")
        if self._key_schema is not None:
            parts.append(f"key_schema={self._key_schema!r}")
        if self._value_schema is not None:
            parts.append(f"value_schema={self._value_schema!r}")
        return f"Schema({', '.join(parts)})"


ConnectSchema = Schema
"""Kafka's name for the immutable schema class."""


def _default_equal(a: Any, b: Any) -> bool:
    # Objects.deepEquals: bytes compare by content; bool and int are different in Java.
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    return bool(a == b)


class SchemaAndValue(NamedTuple):
    """A value with its schema, what converters return when they read (`SchemaAndValue`)."""

    schema: Schema | None
    value: Any


SchemaAndValue.NULL = SchemaAndValue(None, None)  # type: ignore[attr-defined]


# --- validation ---------------------------------------------------------------------------------


def _struct_class() -> type[Struct]:
    from eosconnect.api.data.struct import Struct  # struct.py builds on this module

    return Struct


def field_changes(old: Schema, new: Schema) -> list[str]:
    """How the fields of STRUCT schema `new` differ from `old`'s, one phrase each ("field 'color'
    added (optional STRING)"): what an operator needs to read in a log line or a refused
    registration to see what moved, without diffing two schema dumps by eye."""
    before = {f.name: f.schema for f in old.fields} if old.type is Type.STRUCT else {}
    after = {f.name: f.schema for f in new.fields} if new.type is Type.STRUCT else {}
    changes = [
        f"field {name!r} added ({_brief(schema)})" for name, schema in after.items() if name not in before
    ]
    changes += [f"field {name!r} removed" for name in before if name not in after]
    changes += [
        f"field {name!r} changed from {_brief(schema)} to {_brief(after[name])}"
        for name, schema in before.items()
        if name in after and schema != after[name]
    ]
    return changes


def _brief(schema: Schema) -> str:
    """`optional INT64 Timestamp`: a field schema's optionality, type and logical type, in short."""
    words = ["optional"] if schema.optional else []
    words.append(str(schema.type))
    if schema.name is not None:
        words.append(schema.name.rpartition(".")[2])
    if schema.parameters and "scale" in schema.parameters:
        words.append(f"scale {schema.parameters['scale']}")
    return " ".join(words)


def validate_value(schema: Schema, value: Any, field_name: str | None = None) -> None:
    """Raise `DataException` unless `value` is valid for `schema`; `field_name` names it in errors.

    `ConnectSchema.validateValue`: null only for optional schemas, the right Python type for the
    schema type (or the logical type's class), struct schemas equal, arrays and maps checked
    element by element.
    """
    _validate(schema, value, "value" if field_name is None else f'field: "{field_name}"')


def _type_error(schema: Schema, value: Any, location: str, hint: str = "") -> DataException:
    named = f' "{schema.name}"' if schema.name is not None else ""
    return DataException(
        f"Invalid Python object for schema{named} with type {schema.type}: {type(value).__name__} "
        f"{_short(value)} for {location}{hint}"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _validate(schema: Schema, value: Any, location: str) -> None:
    if value is None:
        if not schema.optional:
            raise DataException(
                f"Invalid value: null used for required {location}, schema type: {schema.type}"
            )
        return
    stype = schema.type
    name = schema.name
    logical = _LOGICAL_CLASSES.get(name) if name is not None else None
    if logical is not None:
        if not isinstance(value, logical) or (
            # datetime is a date subclass; a Date holds a date, a Timestamp a datetime
            name == DATE_LOGICAL_NAME and isinstance(value, datetime.datetime)
        ):
            raise _type_error(schema, value, location, f" (a {name} value is a {logical[0].__qualname__})")
        return
    cls = type(value)
    if stype in _INT_RANGES:
        if cls is bool or not isinstance(value, int):
            raise _type_error(schema, value, location)
        low, high = _INT_RANGES[stype]
        if not low <= value <= high:
            raise DataException(
                f"Invalid value {value} for {location}: out of range for {stype} ({low}..{high})"
            )
    elif stype is Type.FLOAT64 or stype is Type.FLOAT32:
        if cls is bool or not isinstance(value, float | int):
            raise _type_error(schema, value, location)
    elif stype is Type.BOOLEAN:
        if cls is not bool:
            raise _type_error(schema, value, location)
    elif stype is Type.STRING:
        if not isinstance(value, str):
            raise _type_error(schema, value, location)
    elif stype is Type.BYTES:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise _type_error(schema, value, location)
    elif stype is Type.STRUCT:
        if not isinstance(value, _struct_class()):
            raise _type_error(schema, value, location)
        if value.schema != schema:
            raise DataException(f"Struct schemas do not match for {location}.")
        value.validate()
    elif stype is Type.ARRAY:
        if not isinstance(value, list | tuple):
            raise _type_error(schema, value, location)
        where = f"element of array {location}"
        element_schema = _not_none(schema._value_schema, where)
        for item in value:
            _validate(element_schema, item, where)
    elif stype is Type.MAP:
        if not isinstance(value, Mapping):
            raise _type_error(schema, value, location)
        key_where, value_where = f"key of map {location}", f"value of map {location}"
        key_schema = _not_none(schema._key_schema, key_where)
        value_schema = _not_none(schema._value_schema, value_where)
        for k, v in value.items():
            _validate(key_schema, k, key_where)
            _validate(value_schema, v, value_where)


def _not_none(schema: Schema | None, location: str) -> Schema:
    if schema is None:
        raise DataException(f"No schema defined for {location}")
    return schema


INT8_SCHEMA = Schema(Type.INT8)
INT16_SCHEMA = Schema(Type.INT16)
INT32_SCHEMA = Schema(Type.INT32)
INT64_SCHEMA = Schema(Type.INT64)
FLOAT32_SCHEMA = Schema(Type.FLOAT32)
FLOAT64_SCHEMA = Schema(Type.FLOAT64)
BOOLEAN_SCHEMA = Schema(Type.BOOLEAN)
STRING_SCHEMA = Schema(Type.STRING)
BYTES_SCHEMA = Schema(Type.BYTES)
OPTIONAL_INT8_SCHEMA = Schema(Type.INT8, optional=True)
OPTIONAL_INT16_SCHEMA = Schema(Type.INT16, optional=True)
OPTIONAL_INT32_SCHEMA = Schema(Type.INT32, optional=True)
OPTIONAL_INT64_SCHEMA = Schema(Type.INT64, optional=True)
OPTIONAL_FLOAT32_SCHEMA = Schema(Type.FLOAT32, optional=True)
OPTIONAL_FLOAT64_SCHEMA = Schema(Type.FLOAT64, optional=True)
OPTIONAL_BOOLEAN_SCHEMA = Schema(Type.BOOLEAN, optional=True)
OPTIONAL_STRING_SCHEMA = Schema(Type.STRING, optional=True)
OPTIONAL_BYTES_SCHEMA = Schema(Type.BYTES, optional=True)

Schema.Type = Type
for _name in [n for n in __all__ if n.endswith("_SCHEMA")]:
    setattr(Schema, _name, globals()[_name])
del _name
