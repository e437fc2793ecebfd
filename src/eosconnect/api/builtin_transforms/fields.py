"""Kafka's field transformations, schemaless: InsertField, ReplaceField, ExtractField, HoistField,
MaskField, ValueToKey, Flatten.

Each works on the record value, or the key in its `...Key` class (Kafka's `$Key`). As in Kafka, a null
operand passes through where Kafka lets it (InsertField, ReplaceField, ExtractField, MaskField, Flatten)
and any other non-map operand fails with a `DataException` naming what was found.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from eosconnect.api.builtin_transforms.base import (
    KeyOrValueTransformation,
    java_class_name,
    java_double_to_long,
    require_map,
    require_map_or_null,
    schema_type_of,
)
from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import DataException
from eosconnect.api.records import R, SinkRecord
from eosconnect.api.validators import NonEmptyString

log = logging.getLogger(__name__)

_REPLACE_NULL_DOC = (
    "Whether null fields that have a default value are replaced by it (records with schemas); "
    "schemaless records have no defaults."
)


def _replace_null_with_default(config: ConfigDef) -> ConfigDef:
    return config.define(
        "replace.null.with.default", ConfigType.BOOLEAN, True, Importance.MEDIUM, _REPLACE_NULL_DOC
    )


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ValueError(f"Empty list. Set {name} to at least one field name, e.g. id.")


def _field_name(spec: str | None) -> str | None:
    """Kafka lets InsertField's names end in '!' (required) or '?' (optional); schemaless, it is the name."""
    if spec is None:
        return None
    return spec[:-1] if spec.endswith(("!", "?")) else spec


class InsertField(KeyOrValueTransformation[R]):
    """Add fields: a fixed string (`static.field`/`static.value`) and/or record metadata (`topic.field`,
    `partition.field`, `offset.field` (sink records only), `timestamp.field`)."""

    def config_def(self) -> ConfigDef:
        doc = "Field name for the record's {} (leave unset to skip); a trailing ! or ? is accepted."
        return _replace_null_with_default(
            ConfigDef()
            .define("topic.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("topic"))
            .define(
                "partition.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("Kafka partition")
            )
            .define(
                "offset.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("Kafka offset (sinks)")
            )
            .define(
                "timestamp.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("timestamp (ms)")
            )
            .define(
                "static.field", ConfigType.STRING, None, Importance.MEDIUM, "Field name for a static value."
            )
            .define("static.value", ConfigType.STRING, None, Importance.MEDIUM, "The static value to insert.")
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.fields = {
            name: _field_name(self.config[name])
            for name in ("topic.field", "partition.field", "offset.field", "timestamp.field", "static.field")
        }

    def apply(self, record: R) -> R | None:
        operand = self.operand(record)
        if operand is None:
            return record
        updated = dict(require_map(operand, "field insertion"))
        fields = self.fields
        if fields["topic.field"]:
            updated[fields["topic.field"]] = record.topic
        if fields["partition.field"]:
            updated[fields["partition.field"]] = record.partition
        if fields["offset.field"]:
            if not isinstance(record, SinkRecord):
                raise DataException(
                    "InsertField offset.field needs a sink record (only those have a Kafka offset), got a "
                    f"{type(record).__name__} for topic {record.topic!r}. "
                    "Remove offset.field for source connectors."
                )
            updated[fields["offset.field"]] = record.offset
        if fields["timestamp.field"]:
            updated[fields["timestamp.field"]] = record.timestamp
        if fields["static.field"]:
            updated[fields["static.field"]] = self.config["static.value"]
        return self.with_operand(record, updated)


class InsertFieldKey(InsertField[R]):
    """`InsertField` on the record key (Kafka's `InsertField$Key`)."""

    target = "key"


def _renames(name: str, value: Any) -> None:
    bad = [item for item in value if item.count(":") != 1 or not all(item.split(":"))]
    if bad:
        raise ValueError(
            f"Invalid rename mapping: {', '.join(bad)}. "
            f"Set {name} to pairs such as old_name:new_name,other:renamed."
        )


class ReplaceField(KeyOrValueTransformation[R]):
    """Keep (`include`), drop (`exclude`) and rename (`renames=old:new,...`) fields. `include` and `exclude`
    name the original fields; an empty `include` keeps everything not excluded. Kafka 3.x's deprecated
    `whitelist`/`blacklist` are still read as `include`/`exclude` (Kafka 4 dropped them)."""

    def config_def(self) -> ConfigDef:
        return _replace_null_with_default(
            ConfigDef()
            .define("exclude", ConfigType.LIST, "", Importance.MEDIUM, "Fields to drop.")
            .define("include", ConfigType.LIST, "", Importance.MEDIUM, "Fields to keep (empty: all).")
            .define("renames", ConfigType.LIST, "", Importance.MEDIUM, "Renames as old:new,...", _renames)
            .define("blacklist", ConfigType.LIST, None, Importance.LOW, "Deprecated: use exclude.")
            .define("whitelist", ConfigType.LIST, None, Importance.LOW, "Deprecated: use include.")
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        for old, new in (("blacklist", "exclude"), ("whitelist", "include")):
            if self.config[old] is not None:
                log.warning("ReplaceField: %s is deprecated (and gone in Kafka 4); use %s", old, new)
                if not config.get(new):
                    self.config[new] = self.config[old]
        self.exclude = set(self.config["exclude"])
        self.include = set(self.config["include"])
        self.renames = dict(item.split(":") for item in self.config["renames"])

    def apply(self, record: R) -> R | None:
        operand = self.operand(record)
        if operand is None:
            return record
        updated = {
            self.renames.get(name, name): value
            for name, value in require_map(operand, "field replacement").items()
            if name not in self.exclude and (not self.include or name in self.include)
        }
        return self.with_operand(record, updated)


class ReplaceFieldKey(ReplaceField[R]):
    """`ReplaceField` on the record key (Kafka's `ReplaceField$Key`)."""

    target = "key"


class ExtractField(KeyOrValueTransformation[R]):
    """Replace the operand by one of its fields (`field`); a missing field gives null."""

    def config_def(self) -> ConfigDef:
        return _replace_null_with_default(
            ConfigDef().define(
                "field",
                ConfigType.STRING,
                importance=Importance.MEDIUM,
                documentation="Field name to extract.",
                validator=NonEmptyString(),
            )
        )

    def apply(self, record: R) -> R | None:
        value = require_map_or_null(self.operand(record), "field extraction")
        return self.with_operand(record, None if value is None else value.get(self.config["field"]))


class ExtractFieldKey(ExtractField[R]):
    target = "key"


class HoistField(KeyOrValueTransformation[R]):
    """Wrap the operand in a map with one field (`field`)."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "field",
            ConfigType.STRING,
            importance=Importance.MEDIUM,
            documentation="Field name for the single field that will be created in the resulting map.",
        )

    def apply(self, record: R) -> R | None:
        return self.with_operand(record, {self.config["field"]: self.operand(record)})


class HoistFieldKey(HoistField[R]):
    target = "key"


_MASKED_EMPTY: dict[str, Any] = {"BOOLEAN": False, "INT64": 0, "FLOAT64": 0.0, "STRING": ""}


class MaskField(KeyOrValueTransformation[R]):
    """Replace `fields` by their type's empty value (0, false, "", empty list/map) or by `replacement`."""

    def config_def(self) -> ConfigDef:
        return _replace_null_with_default(
            ConfigDef()
            .define(
                "fields",
                ConfigType.LIST,
                importance=Importance.HIGH,
                documentation="Names of fields to mask.",
                validator=_non_empty_list,
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
        operand = self.operand(record)
        if operand is None:
            return record
        value = require_map(operand, "mask fields")
        updated = dict(value)
        for name in self.config["fields"]:
            updated[name] = self._masked(value.get(name))
        return self.with_operand(record, updated)

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
        try:
            number = float(replacement.strip())
        except ValueError:
            raise DataException(
                f"Unable to convert {replacement} (class java.lang.String) to number. "
                "Set replacement to a number "
                "when masking numeric fields."
            ) from None
        if kind == "FLOAT64":
            return number
        stripped = replacement.strip()
        return int(stripped) if stripped.lstrip("+-").isdigit() else java_double_to_long(number)


class MaskFieldKey(MaskField[R]):
    target = "key"


class ValueToKey(KeyOrValueTransformation[R]):
    """Replace the key by a map of `fields` taken from the value."""

    def config_def(self) -> ConfigDef:
        return _replace_null_with_default(
            ConfigDef().define(
                "fields",
                ConfigType.LIST,
                importance=Importance.HIGH,
                documentation="Field names on the record value to extract as the record key.",
                validator=_non_empty_list,
            )
        )

    def apply(self, record: R) -> R | None:
        value = require_map(record.value, "copying fields from value to key")
        return record.new_record(key={name: value.get(name) for name in self.config["fields"]})


class Flatten(KeyOrValueTransformation[R]):
    """Flatten nested maps into one level, joining names with `delimiter`; lists are kept as they are."""

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
        flat: dict[str, Any] = {}
        self._flatten(require_map(operand, "flattening"), "", flat)
        return self.with_operand(record, flat)

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


class FlattenKey(Flatten[R]):
    target = "key"


class SetSchemaMetadata(KeyOrValueTransformation[R]):
    """Set the name and/or version of the operand's schema. Schemaless records have no schema to change:
    a null operand passes, anything else fails as in Kafka ("Schema required")."""

    def config_def(self) -> ConfigDef:
        return _replace_null_with_default(
            ConfigDef()
            .define("schema.name", ConfigType.STRING, None, Importance.HIGH, "Schema name to set.")
            .define("schema.version", ConfigType.INT, None, Importance.HIGH, "Schema version to set.")
        )

    def apply(self, record: R) -> R | None:
        if self.operand(record) is None:
            return record
        raise DataException(
            f"Schema required for [updating schema metadata] on topic {record.topic!r}: SetSchemaMetadata "
            "changes "
            "a record's schema, and this record has none. Use a converter that reads schemas."
        )


class SetSchemaMetadataKey(SetSchemaMetadata[R]):
    target = "key"
