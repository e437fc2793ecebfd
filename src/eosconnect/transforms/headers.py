"""Kafka's header transformations: DropHeaders, HeaderFrom, InsertHeader.

Headers here hold text or bytes (what goes on the wire), so a value that Kafka keeps typed in a
header (a field HeaderFrom copies, an InsertHeader literal) is stored as the text Kafka's default
`SimpleHeaderConverter` writes for it: 42, true, [1,2], {"a":1} (Kafka's `Values.convertToString`).
"""

from __future__ import annotations

import decimal
import json
import math
import re
import struct
from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import Schema, SchemaBuilder, Struct, copy_schema_basics
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.records import R
from eosconnect.api.transforms import Transformation
from eosconnect.api.validators import ValidString
from eosconnect.transforms.base import (
    KeyOrValueTransformation,
    define_replace_null_with_default,
    java_double_str,
    java_float_str,
    non_empty_list,
    require_map,
    require_struct,
    values_to_string,
)


class DropHeaders(Transformation[R]):
    """Remove every header whose name is in `headers`."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "headers",
            ConfigType.LIST,
            importance=Importance.HIGH,
            documentation="The name of the headers to be removed.",
            validator=non_empty_list,
        )

    def apply(self, record: R) -> R | None:
        drop = set(self.config["headers"])
        return record.new_record(headers=[(k, v) for k, v in record.headers if k not in drop])


class HeaderFrom(KeyOrValueTransformation[R]):
    """Copy or move (`operation`) the operand's `fields` into headers named `headers` (same order)."""

    def config_def(self) -> ConfigDef:
        return define_replace_null_with_default(
            ConfigDef()
            .define(
                "fields",
                ConfigType.LIST,
                importance=Importance.HIGH,
                validator=non_empty_list,
                documentation="Field names in the record whose values are to be copied or moved to headers.",
            )
            .define(
                "headers",
                ConfigType.LIST,
                importance=Importance.HIGH,
                validator=non_empty_list,
                documentation="Header names, in the same order as the field names listed in fields.",
            )
            .define(
                "operation",
                ConfigType.STRING,
                importance=Importance.HIGH,
                validator=ValidString(["move", "copy"]),
                documentation="Either move if the fields are to be moved to the headers (removed from the "
                "key/value), or copy if the fields are to be copied to the headers (retained).",
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        if len(self.config["fields"]) != len(self.config["headers"]):
            raise ConfigException(
                errors={
                    "fields": [
                        f"'fields' config must have the same number of elements as 'headers' config. "
                        f"Got {len(self.config['fields'])} fields and {len(self.config['headers'])} "
                        "headers."
                    ]
                }
            )

    def apply(self, record: R) -> R | None:
        schema = self.operand_schema(record)
        if schema is not None:
            return self._apply_with_schema(record, schema)
        value = require_map(self.operand(record), f"header {self.config['operation']}")
        updated = dict(value)
        headers = list(record.headers)
        for field, header in zip(self.config["fields"], self.config["headers"], strict=True):
            field_value = value.get(field)
            if self.config["operation"] == "move":
                updated.pop(field, None)
            headers.append((header, None if field_value is None else _header_text(field_value)))
        return self.with_operand(record, None, updated).new_record(headers=headers)

    def _apply_with_schema(self, record: R, schema: Schema) -> R:
        value = require_struct(self.operand(record), f"header {self.config['operation']}")
        fields = self.config["fields"]
        if self.config["operation"] == "move":
            updated_schema = self.schema_cache.get_or_build(schema, self._moved_schema)
            updated = Struct(updated_schema)
            for moved in updated_schema.fields:
                updated.put(moved.name, self.field_value(value, moved.name))
        else:
            updated_schema, updated = schema, value
        headers = list(record.headers)
        for field_name, header in zip(fields, self.config["headers"], strict=True):
            field = schema.field(field_name)
            if field is None:
                raise DataException(
                    f"HeaderFrom: the record's schema has no field {field_name!r}; its fields are "
                    + ", ".join(f.name for f in schema.fields)
                )
            field_value = self.field_value(value, field_name)
            text = None if field_value is None else values_to_string(field_value, False, field.schema)
            headers.append((header, text))
        return self.with_operand(record, updated_schema, updated).new_record(headers=headers)

    def _moved_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for field in schema.fields:
            if field.name not in self.config["fields"]:
                builder.field(field.name, field.schema)
        return builder.build()


class HeaderFromKey(HeaderFrom[R]):
    target = "key"


def _header_text(value: Any) -> str | bytes:
    return value if isinstance(value, bytes) else values_to_string(value)


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def header_literal(text: str) -> str:
    """InsertHeader's `value.literal` as Kafka puts it on the wire: Kafka parses the literal into a typed
    value (`Values.parseString`) and the default header converter prints that back, so surrounding space
    goes, numbers are normalised (07 -> 7, 3.0 -> 3, a fraction becomes a float32: 1.50 -> 1.5) and JSON
    arrays and objects are written compactly. Other text is kept as it is."""
    stripped = text.strip()
    if _NUMBER.fullmatch(stripped):
        number = decimal.Decimal(stripped)
        if number == number.to_integral_value():
            return str(int(number))
        as_float32 = struct.unpack("f", struct.pack("f", float(number)))[0]
        return java_float_str(as_float32) if math.isfinite(as_float32) else java_double_str(float(number))
    if stripped[:1] in ("[", "{"):
        try:
            return values_to_string(json.loads(stripped))
        except (ValueError, DataException):
            return text
    return stripped


class InsertHeader(Transformation[R]):
    """Add a header `header` whose value is `value.literal`."""

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "header",
                ConfigType.STRING,
                importance=Importance.HIGH,
                documentation="The name of the header.",
            )
            .define(
                "value.literal",
                ConfigType.STRING,
                importance=Importance.HIGH,
                documentation="The literal value that is to be set as the header value on all records.",
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.header_value = header_literal(self.config["value.literal"])

    def apply(self, record: R) -> R | None:
        return record.new_record(headers=[*record.headers, (self.config["header"], self.header_value)])
