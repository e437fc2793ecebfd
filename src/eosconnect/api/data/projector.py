"""`SchemaProjector`: re-shape a value written with one schema to fit a compatible one (Kafka's).

Sinks use it when records of several schema versions land in one table: numbers widen
(INT8 -> ... -> INT64 -> FLOAT32 -> FLOAT64), fields missing from the source take the target's
default or stay null where optional, and extra source fields are dropped. Names and parameters
must match (a Decimal of scale 2 never projects to scale 3).
"""

from __future__ import annotations

import struct as _binary
from typing import Any

from eosconnect.api.data.schema import Schema, Type
from eosconnect.api.data.struct import Struct
from eosconnect.api.errors import DataException

__all__ = ["SchemaProjector", "SchemaProjectorException"]

_NUMERIC_ORDER = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64)
_PROMOTABLE = frozenset(
    (source, target) for i, source in enumerate(_NUMERIC_ORDER) for target in _NUMERIC_ORDER[i:]
)


class SchemaProjectorException(DataException):
    """The source schema cannot be projected onto the target schema."""


def _float32(value: float) -> float:
    return _binary.unpack("f", _binary.pack("f", value))[0]


class SchemaProjector:
    """Kafka's `SchemaProjector.project(source, record, target)`."""

    @staticmethod
    def project(source: Schema, record: Any, target: Schema) -> Any:
        """`record` (valid for `source`) as a value of `target`; raises `SchemaProjectorException`."""
        _check_maybe_compatible(source, target)
        if source.optional and not target.optional:
            if target.default_value is None:
                raise SchemaProjectorException(
                    "Writer schema is optional, however, target schema does not provide a default value."
                )
            return target.default_value if record is None else _project_required(source, record, target)
        return None if record is None else _project_required(source, record, target)

    @staticmethod
    def is_promotable(source: Type, target: Type) -> bool:
        return (source, target) in _PROMOTABLE


def _check_maybe_compatible(source: Schema, target: Schema) -> None:
    if source.type is not target.type and (source.type, target.type) not in _PROMOTABLE:
        raise SchemaProjectorException(
            f"Schema type mismatch. source type: {source.type} and target type: {target.type}"
        )
    if source.name != target.name:
        raise SchemaProjectorException(
            f"Schema name mismatch. source name: {source.name} and target name: {target.name}"
        )
    source_params = None if source.parameters is None else dict(source.parameters)
    target_params = None if target.parameters is None else dict(target.parameters)
    if source_params != target_params:
        raise SchemaProjectorException(
            f"Schema parameters not equal. source parameters: {source_params} and target parameters: "
            f"{target_params}"
        )


def _inner(schema: Schema | None) -> Schema:
    """The key or value schema of an ARRAY or MAP, which a built schema always has."""
    if schema is None:
        raise SchemaProjectorException("an ARRAY or MAP schema without its key or value schema")
    return schema


def _project_required(source: Schema, record: Any, target: Schema) -> Any:
    ttype = target.type
    if ttype is Type.STRUCT:
        return _project_struct(source, record, target)
    if ttype is Type.ARRAY:
        source_values, target_values = _inner(source.value_schema), _inner(target.value_schema)
        return [SchemaProjector.project(source_values, v, target_values) for v in record]
    if ttype is Type.MAP:
        source_keys, target_keys = _inner(source.key_schema), _inner(target.key_schema)
        source_values, target_values = _inner(source.value_schema), _inner(target.value_schema)
        return {
            SchemaProjector.project(source_keys, k, target_keys): SchemaProjector.project(
                source_values,
                v,
                target_values,
            )
            for k, v in record.items()
        }
    return _project_primitive(source, record, target)


def _project_struct(source: Schema, record: Struct, target: Schema) -> Struct:
    result = Struct(target)
    for target_field in target.fields:
        name = target_field.name
        source_field = source.field(name)
        if source_field is not None:
            try:
                value = SchemaProjector.project(source_field.schema, record.get(name), target_field.schema)
            except SchemaProjectorException as exc:
                raise SchemaProjectorException(f"Error projecting {name}: {exc}") from exc
            result.put(name, value)
        elif target_field.schema.optional:
            continue
        elif target_field.schema.default_value is not None:
            result.put(name, target_field.schema.default_value)
        else:
            raise SchemaProjectorException(f"Required field `{name}` is missing from source schema: {source}")
    return result


def _project_primitive(source: Schema, record: Any, target: Schema) -> Any:
    if (
        (source.type, target.type) in _PROMOTABLE
        and isinstance(record, int | float)
        and type(record) is not bool
    ):
        ttype = target.type
        if ttype is Type.FLOAT64:
            return float(record)
        if ttype is Type.FLOAT32:
            return _float32(float(record))
        return int(record)
    return record
