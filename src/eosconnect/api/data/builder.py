"""`SchemaBuilder`, Kafka's fluent way to make a `Schema` (`SchemaBuilder.struct().name("x").field(...)`),
and `copy_schema_basics`, what transformations start a new schema from.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from eosconnect.api.data.schema import Field, Schema, SchemaBuilderException, Type, validate_value
from eosconnect.api.errors import DataException

__all__ = ["SchemaBuilder", "copy_schema_basics"]


class SchemaBuilder:
    """Kafka's fluent `SchemaBuilder`: start from a type, set properties, `build()`.

    Each property may be set once (setting it again to a different value raises
    `SchemaBuilderException`); the default value is validated against what has been set so far, so
    set `name`/`optional` before `default_value`. Field schemas may be builders; they are built
    when added.
    """

    __slots__ = (
        "_default",
        "_doc",
        "_fields",
        "_key_schema",
        "_name",
        "_optional",
        "_parameters",
        "_type",
        "_value_schema",
        "_version",
    )

    def __init__(self, type: Type) -> None:
        if type is None:
            raise SchemaBuilderException("type cannot be null")
        if not isinstance(type, Type):
            raise SchemaBuilderException(f"type must be an eosconnect.api.Type, got {type!r}")
        self._type = type
        self._optional: bool | None = None
        self._default: Any = None
        self._fields: dict[str, Field] | None = {} if type is Type.STRUCT else None
        self._key_schema: Schema | None = None
        self._value_schema: Schema | None = None
        self._name: str | None = None
        self._version: int | None = None
        self._doc: str | None = None
        self._parameters: dict[str, str] | None = None

    # Factories, as Kafka's static methods.
    @classmethod
    def int8(cls) -> SchemaBuilder:
        return cls(Type.INT8)

    @classmethod
    def int16(cls) -> SchemaBuilder:
        return cls(Type.INT16)

    @classmethod
    def int32(cls) -> SchemaBuilder:
        return cls(Type.INT32)

    @classmethod
    def int64(cls) -> SchemaBuilder:
        return cls(Type.INT64)

    @classmethod
    def float32(cls) -> SchemaBuilder:
        return cls(Type.FLOAT32)

    @classmethod
    def float64(cls) -> SchemaBuilder:
        return cls(Type.FLOAT64)

    @classmethod
    def bool(cls) -> SchemaBuilder:
        return cls(Type.BOOLEAN)

    @classmethod
    def string(cls) -> SchemaBuilder:
        return cls(Type.STRING)

    @classmethod
    def bytes(cls) -> SchemaBuilder:
        return cls(Type.BYTES)

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(Type.STRUCT)

    @classmethod
    def array(cls, value_schema: Schema | SchemaBuilder) -> SchemaBuilder:
        if value_schema is None:
            raise SchemaBuilderException("valueSchema cannot be null.")
        builder = cls(Type.ARRAY)
        builder._value_schema = _built(value_schema)
        return builder

    @classmethod
    def map(cls, key_schema: Schema | SchemaBuilder, value_schema: Schema | SchemaBuilder) -> SchemaBuilder:
        if key_schema is None:
            raise SchemaBuilderException("keySchema cannot be null.")
        if value_schema is None:
            raise SchemaBuilderException("valueSchema cannot be null.")
        builder = cls(Type.MAP)
        builder._key_schema = _built(key_schema)
        builder._value_schema = _built(value_schema)
        return builder

    @classmethod
    def _raw(
        cls, type: Type, key_schema: Schema | None = None, value_schema: Schema | None = None
    ) -> SchemaBuilder:
        """An ARRAY/MAP builder whose element schemas may be missing (what JSON schema parsing needs)."""
        builder = cls(type)
        builder._key_schema = key_schema
        builder._value_schema = value_schema
        return builder

    # What has been set so far.
    @property
    def type(self) -> Type:
        return self._type

    @property
    def fields(self) -> list[Field]:
        if self._fields is None:
            raise DataException(f"Cannot list fields on non-struct type {self._type}")
        return list(self._fields.values())

    @property
    def is_optional(self) -> builtins.bool:
        return builtins.bool(self._optional)

    # Setters.
    def optional(self) -> SchemaBuilder:
        _check_can_set("optional", self._optional, True)
        self._optional = True
        return self

    def required(self) -> SchemaBuilder:
        _check_can_set("optional", self._optional, False)
        self._optional = False
        return self

    def default_value(self, value: Any) -> SchemaBuilder:
        _check_can_set("default", self._default, value)
        try:
            validate_value(self.build(), value)
        except DataException as exc:
            raise SchemaBuilderException(f"Invalid default value: {exc}") from exc
        self._default = value
        return self

    def name(self, name: str | None) -> SchemaBuilder:
        _check_can_set("name", self._name, name)
        self._name = name
        return self

    def version(self, version: int | None) -> SchemaBuilder:
        _check_can_set("version", self._version, version)
        self._version = version
        return self

    def doc(self, doc: str | None) -> SchemaBuilder:
        _check_can_set("doc", self._doc, doc)
        self._doc = doc
        return self

    def parameter(self, name: str, value: str) -> SchemaBuilder:
        if self._parameters is None:
            self._parameters = {}
        self._parameters[name] = value
        return self

    def parameters(self, parameters: Mapping[str, str]) -> SchemaBuilder:
        if not parameters:  # Kafka never stores an empty parameter map
            return self
        if self._parameters is None:
            self._parameters = {}
        self._parameters.update(parameters)
        return self

    def field(self, name: str, schema: Schema | SchemaBuilder) -> SchemaBuilder:
        """Add a STRUCT field (at the next index)."""
        if self._fields is None:
            raise SchemaBuilderException(f"Cannot create fields on type {self._type}")
        if not name:
            raise SchemaBuilderException("fieldName cannot be null.")
        if schema is None:
            raise SchemaBuilderException(f"fieldSchema for field {name} cannot be null.")
        if name in self._fields:
            raise SchemaBuilderException(f"Cannot create field because of field name duplication {name}")
        self._fields[name] = Field(name, len(self._fields), _built(schema))
        return self

    def get_field(self, name: str) -> Field | None:
        """The STRUCT field added as `name`, or None (Kafka's `SchemaBuilder.field(String)`)."""
        if self._fields is None:
            raise DataException(f"Cannot look up fields on non-struct type {self._type}")
        return self._fields.get(name)

    def build(self) -> Schema:
        return Schema(
            self._type,
            bool(self._optional),
            self._default,
            self._name,
            self._version,
            self._doc,
            self._parameters,
            None if self._fields is None else tuple(self._fields.values()),
            self._key_schema,
            self._value_schema,
        )

    @property
    def schema(self) -> Schema:
        return self.build()


def _built(schema: Schema | SchemaBuilder) -> Schema:
    if isinstance(schema, SchemaBuilder):
        return schema.build()
    if not isinstance(schema, Schema):
        raise SchemaBuilderException(f"expected a Schema or SchemaBuilder, got {type(schema).__name__}")
    return schema


def _check_can_set(name: str, current: Any, new: Any) -> None:
    if current is not None and current != new:
        raise SchemaBuilderException(f"Invalid SchemaBuilder call: {name} has already been set.")


def copy_schema_basics(source: Schema, builder: SchemaBuilder | None = None) -> SchemaBuilder:
    """A builder (`builder`, or a new one of `source`'s type) with `source`'s name, version, doc and
    parameters: Kafka's `SchemaUtil.copySchemaBasics`, what transformations start a new schema from."""
    if builder is None:
        builder = SchemaBuilder(source.type)
    builder.name(source.name)
    builder.version(source.version)
    builder.doc(source.doc)
    if source.parameters:
        builder.parameters(source.parameters)
    return builder
