"""Kafka's transformations of a record's shape as a whole: MaskField (values replaced by their type's
empty value or a replacement), ValueToKey, Flatten, SetSchemaMetadata.

Each works on the record value, or the key in its `...Key` class (Kafka's `$Key`). As in Kafka, a null
operand passes through where Kafka lets it (MaskField, Flatten) and any other non-map operand fails
with a `DataException` naming what was found.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import (
    Date,
    Decimal,
    Schema,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
    Type,
    copy_schema_basics,
)
from eosconnect.api.errors import DataException
from eosconnect.api.records import R
from eosconnect.api.validators import NonEmptyString
from eosconnect.transforms.base import (
    KeyOrValueTransformation,
    builder_like,
    define_replace_null_with_default,
    java_class_name,
    java_double_to_long,
    non_empty_list,
    require_map,
    require_struct,
    schema_type_of,
)
from eosconnect.transforms.field_path import SYNTAX_SETTING, FieldPath, define_field_syntax

if TYPE_CHECKING:
    pass

_MASKED_EMPTY: dict[str, Any] = {"BOOLEAN": False, "INT64": 0, "FLOAT64": 0.0, "STRING": ""}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class MaskField(KeyOrValueTransformation[R]):
    """Replace `fields` by their type's empty value (0, false, "", empty list/map, the epoch) or by
    `replacement` (numbers and strings)."""

    def config_def(self) -> ConfigDef:
        return define_replace_null_with_default(
            ConfigDef()
            .define(
                "fields",
                ConfigType.LIST,
                importance=Importance.HIGH,
                documentation="Names of fields to mask.",
                validator=non_empty_list,
            )
            .define(
                "replacement",
                ConfigType.STRING,
                None,
                Importance.LOW,
                "Custom value replacement, applied to all `fields` values (numeric or non-empty string "
                "values only).",
                NonEmptyString(),
            )
        )

    def apply(self, record: R) -> R | None:
        operand = self.operand(record)  # Kafka's MaskField has no pass for nulls: they fail below
        if self.operand_schema(record) is not None:
            struct = require_struct(operand, "mask fields")
            result = Struct(struct.schema)
            for field in struct.schema.fields:
                original = self.field_value(struct, field.name)
                masked = field.name in self.config["fields"]
                result.put(field.name, self._masked_typed(field.schema, original) if masked else original)
            return self.with_operand(record, struct.schema, result)
        value = require_map(operand, "mask fields")
        updated = dict(value)
        for name in self.config["fields"]:
            updated[name] = self._masked(value.get(name))
        return self.with_operand(record, None, updated)

    def _masked(self, value: Any) -> Any:
        if value is None:
            return None
        kind = schema_type_of(value)
        replacement = self.config["replacement"]
        if replacement is None:
            if kind in _MASKED_EMPTY:
                return _MASKED_EMPTY[kind]
            if kind == "ARRAY":
                return []
            if kind == "MAP":
                return {}
            raise DataException(f"Cannot mask value of type: {java_class_name(value)}")
        if kind == "STRING":
            return replacement
        if kind not in ("INT64", "FLOAT64"):
            raise DataException(
                f"Cannot mask value of type {java_class_name(value)} with custom replacement."
            )
        return self._number(replacement, integer=kind == "INT64")

    def _masked_typed(self, schema: Schema, value: Any) -> Any:
        """Masking a struct field: by its schema, as Kafka masks by the Java class of the value."""
        if value is None:
            return None
        replacement = self.config["replacement"]
        logical = _MASKED_LOGICAL.get(schema.name or "")
        if schema.type in (Type.INT8, Type.INT16, Type.INT32, Type.INT64) and logical is None:
            return 0 if replacement is None else self._number(replacement, integer=True)
        if schema.type in (Type.FLOAT32, Type.FLOAT64):
            return 0.0 if replacement is None else self._number(replacement, integer=False)
        if schema.name == Decimal.LOGICAL_NAME:
            return decimal.Decimal(0) if replacement is None else self._decimal(replacement)
        if replacement is None and logical is not None:
            return logical
        if replacement is None and schema.type in (Type.BOOLEAN, Type.STRING, Type.ARRAY, Type.MAP):
            return {Type.BOOLEAN: False, Type.STRING: "", Type.ARRAY: [], Type.MAP: {}}[schema.type]
        if replacement is not None and schema.type is Type.STRING:
            return replacement
        if replacement is None:
            raise DataException(f"Cannot mask value of type: {java_class_name(value)}")
        raise DataException(f"Cannot mask value of type {java_class_name(value)} with custom replacement.")

    @staticmethod
    def _number(replacement: str, integer: bool) -> Any:
        try:
            number = float(replacement.strip())
        except ValueError:
            raise DataException(
                f"Unable to convert {replacement} (class java.lang.String) to number. "
                "Set replacement to a number when masking numeric fields."
            ) from None
        if not integer:
            return number
        stripped = replacement.strip()
        return int(stripped) if stripped.lstrip("+-").isdigit() else java_double_to_long(number)

    @staticmethod
    def _decimal(replacement: str) -> decimal.Decimal:
        try:
            return decimal.Decimal(replacement)
        except decimal.InvalidOperation:
            raise DataException(
                f"Unable to convert {replacement} (class java.lang.String) to number"
            ) from None


_MASKED_LOGICAL: dict[str, Any] = {
    Date.LOGICAL_NAME: datetime.date(1970, 1, 1),
    Time.LOGICAL_NAME: datetime.time(0),
    Timestamp.LOGICAL_NAME: _EPOCH,
}


class MaskFieldKey(MaskField[R]):
    target = "key"


class ValueToKey(KeyOrValueTransformation[R]):
    """Replace the key by a map (or a struct, with a schema) of `fields` taken from the value; with
    `field.syntax.version=V2` a field may be nested (`a.b`), and the key field is named by its path."""

    def config_def(self) -> ConfigDef:
        return define_replace_null_with_default(
            define_field_syntax(ConfigDef()).define(
                "fields",
                ConfigType.LIST,
                importance=Importance.HIGH,
                documentation="Field names on the record value to extract as the record key.",
                validator=non_empty_list,
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.paths = [FieldPath(name, self.config[SYNTAX_SETTING]) for name in self.config["fields"]]

    def apply(self, record: R) -> R | None:
        if record.value_schema is None:
            value = require_map(record.value, "copying fields from value to key")
            return record.new_record(
                key={p.text: p.value_from_map(value) for p in self.paths}, key_schema=None
            )
        struct = require_struct(record.value, "copying fields from value to key")
        key_schema = self.schema_cache.get_or_build(struct.schema, self._key_schema)
        key = Struct(key_schema)
        with_default = self.config["replace.null.with.default"]
        for path in self.paths:
            key.put(path.text, path.value_from_struct(struct, with_default))
        return record.new_record(key=key, key_schema=key_schema)

    def _key_schema(self, value_schema: Schema) -> Schema:
        builder = SchemaBuilder.struct()
        for path in self.paths:
            field = path.field_from(value_schema)
            if field is None:
                raise DataException(
                    f"Field does not exist: {path.text}. The value's fields are: "
                    + ", ".join(f.name for f in value_schema.fields)
                )
            builder.field(path.text, field.schema)
        return builder.build()


class Flatten(KeyOrValueTransformation[R]):
    """Flatten nested maps (or structs) into one level, joining names with `delimiter`; lists are kept."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "delimiter",
            ConfigType.STRING,
            ".",
            Importance.MEDIUM,
            "Delimiter between the field names of the input record to make the field names of the output.",
        )

    def apply(self, record: R) -> R | None:
        operand = self.operand(record)
        if operand is None:
            return record
        schema = self.operand_schema(record)
        if schema is not None:
            updated_schema = self.schema_cache.get_or_build(schema, self._flat_schema)
            result = Struct(updated_schema)
            self._flatten_struct(require_struct(operand, "flattening"), "", result)
            return self.with_operand(record, updated_schema, result)
        flat: dict[str, Any] = {}
        self._flatten(require_map(operand, "flattening"), "", flat)
        return self.with_operand(record, None, flat)

    def _flatten(self, source: Mapping[str, Any], prefix: str, into: dict[str, Any]) -> None:
        for key, value in source.items():
            name = f"{prefix}{self.config['delimiter']}{key}" if prefix else key
            kind = schema_type_of(value)
            if value is None or kind not in ("MAP", None):
                into[name] = value
            elif kind == "MAP":
                self._flatten(value, name, into)
            else:
                raise DataException(
                    f"Flatten transformation was passed a value of type {java_class_name(value)} which is "
                    "not "
                    "supported by Connect's data API"
                )

    def _name(self, prefix: str, name: str) -> str:
        return f"{prefix}{self.config['delimiter']}{name}" if prefix else name

    def _flat_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        self._flat_fields(schema, "", builder, schema.optional, schema.default_value)
        return builder.build()

    def _flat_fields(
        self, schema: Schema, prefix: str, builder: SchemaBuilder, optional: bool, parent_default: Any
    ) -> None:
        for field in schema.fields:
            name = self._name(prefix, field.name)
            field_optional = optional or field.schema.optional
            default = field.schema.default_value
            if default is None and parent_default is not None:
                default = parent_default.get(field.name)
            if field.schema.type is Type.STRUCT:
                self._flat_fields(field.schema, name, builder, field_optional, default)
            elif field.schema.type is Type.MAP:
                raise DataException(
                    f"Flatten transformation does not support MAP for record with schemas (for field {name})."
                )
            else:
                field_builder = builder_like(field.schema)
                if field_optional:
                    field_builder.optional()
                if default is not None:
                    field_builder.default_value(default)
                builder.field(name, field_builder.build())

    def _flatten_struct(self, struct: Struct | None, prefix: str, into: Struct) -> None:
        if struct is None:
            return
        for field in struct.schema.fields:
            name = self._name(prefix, field.name)
            if field.schema.type is Type.STRUCT:
                self._flatten_struct(struct.get(field.name), name, into)
            else:
                into.put(name, struct.get(field.name))


class FlattenKey(Flatten[R]):
    target = "key"


class SetSchemaMetadata(KeyOrValueTransformation[R]):
    """Set the name and/or version of the operand's schema. Schemaless records have no schema to change:
    a null operand passes, anything else fails as in Kafka ("Schema required")."""

    def config_def(self) -> ConfigDef:
        return define_replace_null_with_default(
            ConfigDef()
            .define("schema.name", ConfigType.STRING, None, Importance.HIGH, "Schema name to set.")
            .define("schema.version", ConfigType.INT, None, Importance.HIGH, "Schema version to set.")
        )

    def apply(self, record: R) -> R | None:
        schema = self.operand_schema(record)
        value = self.operand(record)
        if schema is not None:
            name, version = self.config["schema.name"], self.config["schema.version"]
            updated = Schema(
                schema.type,
                schema.optional,
                schema.default_value,
                name if name is not None else schema.name,
                version if version is not None else schema.version,
                schema.doc,
                schema.parameters,
                # Kafka 4 passes schema.fields() for every type, so only structs pass; so do we.
                fields=list(schema.fields),
                key_schema=schema.key_schema if schema.type is Type.MAP else None,
                value_schema=schema.value_schema if schema.type in (Type.MAP, Type.ARRAY) else None,
            )
            if isinstance(value, Struct):
                struct = Struct(updated)
                for field in value.schema.fields:
                    struct.put(field.name, self.field_value(value, field.name))
                value = struct
            return self.with_operand(record, updated, value)
        if value is None:
            return record
        raise DataException(
            f"Schema required for [updating schema metadata] on topic {record.topic!r}: SetSchemaMetadata "
            "changes "
            "a record's schema, and this record has none. Use a converter that reads schemas."
        )


class SetSchemaMetadataKey(SetSchemaMetadata[R]):
    target = "key"
