"""Kafka's Cast and TimestampConverter, schemaless: change the type of fields or of the whole operand.

Numbers narrow as Java's casts do (an int64 of 300 cast to int8 is 44), strings parse as Java's
`Long.parseLong`/`Double.parseDouble`/`Boolean.parseBoolean`, values print as Java's `toString`
(1.0E10, true), and bytes cast to string are base64. Timestamps: string (a `SimpleDateFormat` `format`
in UTC), unix (an int in `unix.precision`), and Timestamp/Date/Time (Python `datetime` in UTC).
"""

from __future__ import annotations

import decimal
import re
import struct
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import Date, Schema, SchemaBuilder, Struct, Time, Timestamp, Type, copy_schema_basics
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.records import R
from eosconnect.api.validators import ValidString
from eosconnect.transforms.base import (
    LOGICAL_TYPES,
    KeyOrValueTransformation,
    define_replace_null_with_default,
    iso_date_string,
    java_big_decimal_str,
    java_class_name,
    java_double_to_long,
    java_float_str,
    java_to_string,
    logical_millis,
    require_map,
    require_struct,
    schema_type_of,
    wrap_int,
)
from eosconnect.transforms.javadate import JavaDateFormat

_INPUT_TYPES = ["INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING", "BYTES"]
_OUTPUT_TYPES = _INPUT_TYPES[:-1]
_ALL_TYPES = {*_INPUT_TYPES, "ARRAY", "MAP", "STRUCT"}
_INT_BITS = {"INT8": 8, "INT16": 16, "INT32": 32, "INT64": 64}
_JAVA_INT = re.compile(r"[+-]?\d+")


def _supported(kind: str, types: list[str]) -> str:
    return "[" + ", ".join(types) + "]"


def parse_cast_spec(spec: list[str]) -> dict[str | None, str]:
    """`field:type,...` or a single `type` (key None: the whole operand); ConfigException as Kafka's."""
    if not spec:
        raise ConfigException("Must specify at least one field to cast.")
    casts: dict[str | None, str] = {}
    for mapping in spec:
        parts = mapping.split(":")
        if len(parts) > 2:
            raise ConfigException(
                f"Invalid rename mapping: {mapping}. Write each cast as field:type, e.g. id:int32."
            )
        type_name = parts[-1].strip().upper()
        if type_name not in _ALL_TYPES:
            raise ConfigException(f"Invalid type found in casting spec: {parts[-1].strip()}")
        if type_name not in _OUTPUT_TYPES:
            raise ConfigException(
                f"Cast transformation does not support casting to {type_name}; supported types are "
                f"{_supported(type_name, _OUTPUT_TYPES)}"
            )
        casts[None if len(parts) == 1 else parts[0].strip()] = type_name
    if None in casts and len(spec) > 1:
        raise ConfigException(
            "Cast transformations that specify a type to cast the entire value to may only specify a single "
            "cast in their spec"
        )
    return casts


def _spec_validator(name: str, value: Any) -> None:
    try:
        parse_cast_spec(value)
    except ConfigException as exc:
        raise ValueError(str(exc)) from None


def _to_float32(value: float) -> float:
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _parse_java_float(text: str) -> float:
    try:
        return float(text.strip().rstrip("dDfF"))
    except ValueError:
        raise DataException(f"Value ({text}) was out of range for requested data type") from None


def cast_value(value: Any, target: str, schema: Schema | None = None) -> Any:
    """One value cast as Kafka's `Cast.castValueToType` does (by `schema` where the record has one)."""
    if value is None:
        return None
    if schema is not None:
        kind = schema.type.name
        if kind not in _INPUT_TYPES:
            raise DataException(
                f"Cast transformation does not support casting from {kind}; supported types are "
                f"{_supported(kind, _INPUT_TYPES)}"
            )
        if schema.name in LOGICAL_TYPES:
            if target == "STRING":
                return iso_date_string(logical_millis(schema, value))
            value = LOGICAL_TYPES[schema.name].from_logical(schema, value)
        elif target == "STRING" and schema.type is Type.FLOAT32:
            return java_float_str(value)
        elif target == "STRING" and isinstance(value, decimal.Decimal):
            return java_big_decimal_str(value)
        if isinstance(value, bytes | bytearray) and target == "STRING":
            return java_to_string(value)
        if isinstance(value, decimal.Decimal):
            value = float(value) if target in ("FLOAT32", "FLOAT64") else int(value)
        if schema.type in (Type.FLOAT32, Type.FLOAT64) and target == "STRING":
            return java_to_string(float(value))
        if isinstance(value, bytes | bytearray) and target != "STRING":
            raise DataException(f"Unexpected type in Cast transformation: {java_class_name(value)}")
    value_kind = schema_type_of(value)
    if value_kind is None:
        raise DataException(
            f"Cast transformation was passed a value of type {java_class_name(value)} which is not supported "
            "by Connect's data API"
        )
    if value_kind not in _INPUT_TYPES:
        raise DataException(
            f"Cast transformation does not support casting from {value_kind}; supported types are "
            f"{_supported(value_kind, _INPUT_TYPES)}"
        )
    if target == "STRING":
        return java_to_string(value)
    if value_kind == "BYTES":
        raise DataException(f"Unexpected type in Cast transformation: {java_class_name(value)}")
    if target in _INT_BITS:
        bits = _INT_BITS[target]
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return wrap_int(value, bits)
        if isinstance(value, float):
            return wrap_int(java_double_to_long(value, 32 if bits < 64 else 64), bits)
        if not _JAVA_INT.fullmatch(value) or not -(1 << (bits - 1)) <= int(value) < 1 << (bits - 1):
            raise DataException(f"Value ({value}) was out of range for requested data type")
        return int(value)
    if target in ("FLOAT32", "FLOAT64"):
        number = float(value) if not isinstance(value, str) else _parse_java_float(value)
        return _to_float32(number) if target == "FLOAT32" else number
    # BOOLEAN
    if isinstance(value, str):
        return value.lower() == "true"
    if isinstance(value, float):
        return java_double_to_long(value) != 0
    return bool(value)


class Cast(KeyOrValueTransformation[R]):
    """Cast fields (`spec=field:type,...`) or the whole operand (`spec=type`) to int8..int64, float32,
    float64, boolean or string."""

    def config_def(self) -> ConfigDef:
        return define_replace_null_with_default(
            ConfigDef().define(
                "spec",
                ConfigType.LIST,
                importance=Importance.HIGH,
                validator=_spec_validator,
                documentation="Fields and the type to cast them to, as field1:type,field2:type, or a single "
                "type to cast the entire value. Types: int8, int16, int32, int64, float32, float64, boolean, "
                "string; binary fields can only be cast to string.",
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.casts = parse_cast_spec(self.config["spec"])

    def apply(self, record: R) -> R | None:
        operand = self.operand(record)
        if operand is None:
            return record
        schema = self.operand_schema(record)
        if schema is not None:
            return self._apply_with_schema(record, schema, operand)
        if None in self.casts:
            return self.with_operand(record, None, cast_value(operand, self.casts[None]))
        value = require_map(operand, "cast types")
        updated = dict(value)
        for name, target in self.casts.items():
            assert name is not None
            updated[name] = cast_value(value.get(name), target)
        return self.with_operand(record, None, updated)

    def _apply_with_schema(self, record: R, schema: Schema, operand: Any) -> R:
        updated_schema = self.schema_cache.get_or_build(schema, self._updated_schema)
        if None in self.casts:
            return self.with_operand(record, updated_schema, cast_value(operand, self.casts[None], schema))
        struct = require_struct(operand, "cast types")
        result = Struct(updated_schema)
        for field in struct.schema.fields:
            original = self.field_value(struct, field.name)
            target = self.casts.get(field.name)
            result.put(field.name, original if target is None else cast_value(original, target, field.schema))
        return self.with_operand(record, updated_schema, result)

    def _updated_schema(self, schema: Schema) -> Schema:
        if None in self.casts:
            builder = copy_schema_basics(schema, SchemaBuilder(Type[self.casts[None]]))
        else:
            builder = copy_schema_basics(schema, SchemaBuilder.struct())
            for field in schema.fields:
                target = self.casts.get(field.name)
                if target is None:
                    builder.field(field.name, field.schema)
                    continue
                field_builder = SchemaBuilder(Type[target])
                if field.schema.optional:
                    field_builder.optional()
                if field.schema.default_value is not None:
                    field_builder.default_value(cast_value(field.schema.default_value, target, field.schema))
                builder.field(field.name, field_builder.build())
        if schema.optional:
            builder.optional()
        if schema.default_value is not None:
            builder.default_value(cast_value(schema.default_value, builder.type.name, schema))
        return builder.build()


class CastKey(Cast[R]):
    target = "key"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _trunc_div(value: int, divisor: int) -> int:
    quotient = abs(value) // divisor
    return quotient if value >= 0 else -quotient


class TimestampConverter(KeyOrValueTransformation[R]):
    """Convert a timestamp field (`field`, empty: the whole operand) between string (`format`), unix
    (`unix.precision`), Date, Time and Timestamp (`target.type`)."""

    def config_def(self) -> ConfigDef:
        return define_replace_null_with_default(
            ConfigDef()
            .define(
                "field",
                ConfigType.STRING,
                "",
                Importance.HIGH,
                "The field containing the timestamp, or empty if the entire value is a timestamp",
            )
            .define(
                "target.type",
                ConfigType.STRING,
                importance=Importance.HIGH,
                validator=ValidString(["string", "unix", "Date", "Time", "Timestamp"]),
                documentation="The desired timestamp representation: string, unix, Date, Time, or Timestamp",
            )
            .define(
                "format",
                ConfigType.STRING,
                "",
                Importance.MEDIUM,
                "A SimpleDateFormat-compatible format for the timestamp, used to parse or write strings.",
            )
            .define(
                "unix.precision",
                ConfigType.STRING,
                "milliseconds",
                Importance.LOW,
                validator=ValidString(["nanoseconds", "microseconds", "milliseconds", "seconds"]),
                documentation="The precision of unix timestamps read or written.",
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        pattern = self.config["format"]
        if self.config["target.type"] == "string" and not pattern.strip():
            raise ConfigException(
                "TimestampConverter requires format option to be specified when using string timestamps"
            )
        self.format: JavaDateFormat | None = None
        if pattern.strip():
            try:
                self.format = JavaDateFormat(pattern)
            except ValueError as exc:
                raise ConfigException(
                    "TimestampConverter requires a SimpleDateFormat-compatible pattern for string "
                    f"timestamps: {pattern} ({exc})"
                ) from None

    def apply(self, record: R) -> R | None:
        operand = self.operand(record)
        field = self.config["field"]
        schema = self.operand_schema(record)
        if schema is not None:
            return self._apply_with_schema(record, schema, operand)
        if operand is None or not field:
            return self.with_operand(record, None, self._convert(operand))
        value = require_map(operand, "converting timestamp formats")
        updated = dict(value)
        updated[field] = self._convert(value.get(field))
        return self.with_operand(record, None, updated)

    def _convert(self, value: Any, schema: Schema | None = None) -> Any:
        if value is None:
            return None
        if schema is not None and schema.name in LOGICAL_TYPES:
            return self._from_millis(logical_millis(schema, value))
        if schema is not None and schema.type not in (Type.STRING, Type.INT64):
            raise DataException(f"Schema {schema} does not correspond to a known timestamp type format")
        return self._from_millis(self._to_millis(value))

    def _target_schema(self, optional: bool) -> Schema:
        builder = {
            "string": SchemaBuilder.string,
            "unix": SchemaBuilder.int64,
            "Date": Date.builder,
            "Time": Time.builder,
            "Timestamp": Timestamp.builder,
        }[self.config["target.type"]]()
        return builder.optional().build() if optional else builder.build()

    def _apply_with_schema(self, record: R, schema: Schema, operand: Any) -> R:
        name = self.config["field"]
        if not name:
            return self.with_operand(
                record, self._target_schema(schema.optional), self._convert(operand, schema)
            )
        struct = None if operand is None else require_struct(operand, "converting timestamp formats")
        updated = self.schema_cache.get_or_build(schema, self._updated_schema)
        return self.with_operand(record, updated, self._convert_struct(struct, updated))

    def _updated_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for field in schema.fields:
            if field.name == self.config["field"]:
                builder.field(field.name, self._target_schema(field.schema.optional))
            else:
                builder.field(field.name, field.schema)
        if schema.optional:
            builder.optional()
        if schema.default_value is not None:
            builder.default_value(self._convert_struct(schema.default_value, builder))
        return builder.build()

    def _convert_struct(self, struct: Struct | None, updated: Any) -> Struct | None:
        if struct is None:
            return None
        result = Struct(updated if isinstance(updated, Schema) else updated.build())
        for field in struct.schema.fields:
            value = self.field_value(struct, field.name)
            if field.name == self.config["field"]:
                value = self._convert(value, field.schema)
            result.put(field.name, value)
        return result

    def _to_millis(self, value: Any) -> int:
        if isinstance(value, datetime):
            return int((value - _EPOCH) / timedelta(milliseconds=1))
        if isinstance(value, date):
            return (value - _EPOCH.date()).days * 86_400_000
        if isinstance(value, time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
        if isinstance(value, int) and not isinstance(value, bool):
            precision = self.config["unix.precision"]
            if precision == "seconds":
                return value * 1000
            if precision == "microseconds":
                return _trunc_div(value, 1000)
            if precision == "nanoseconds":
                return _trunc_div(value, 1_000_000)
            return value
        if isinstance(value, str):
            if self.format is None:
                raise DataException(
                    f"Could not parse timestamp: value ({value}) needs a format; set format to its "
                    "SimpleDateFormat pattern"
                )
            try:
                return self.format.parse(value)
            except ValueError:
                raise DataException(
                    f"Could not parse timestamp: value ({value}) does not match pattern "
                    f"({self.format.pattern})"
                ) from None
        raise DataException(
            f"TimestampConverter does not support {java_class_name(value)} objects as timestamps"
        )

    def _from_millis(self, millis: int) -> Any:
        target = self.config["target.type"]
        if target == "string":
            assert self.format is not None
            return self.format.format(millis)
        if target == "unix":
            precision = self.config["unix.precision"]
            if precision == "seconds":
                return _trunc_div(millis, 1000)
            return millis * {"milliseconds": 1, "microseconds": 1000, "nanoseconds": 1_000_000}[precision]
        moment = _EPOCH + timedelta(milliseconds=millis)
        if target == "Date":
            return moment.date()
        if target == "Time":
            return moment.time()
        return moment


class TimestampConverterKey(TimestampConverter[R]):
    target = "key"
