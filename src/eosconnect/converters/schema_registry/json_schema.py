"""`JsonSchemaConverter`: Confluent's `io.confluent.connect.json.JsonSchemaConverter`, in Python.

The wire format (magic byte, schema id) in front of the record as compact UTF-8 JSON; the schema is
the JSON Schema `json_schema_data` maps the Connect schema to, registered as type `JSON`.
"""

from __future__ import annotations

import decimal
import json
from typing import Any

from confluent_kafka.schema_registry import Schema as RegistrySchema

from eosconnect.api.data import Schema, SchemaAndValue
from eosconnect.api.errors import DataException
from eosconnect.converters.schema_registry.base import LruCache, RegistryConverter
from eosconnect.converters.schema_registry.json_schema_data import (
    dump_json,
    from_json_schema,
    from_json_value,
    has_decimal,
    json_value_converter,
    to_json_schema,
)
from eosconnect.converters.schema_registry.settings import schema_text
from eosconnect.converters.schema_registry.wire import frame, unframe

__all__ = ["JsonSchemaConverter"]


class JsonSchemaConverter(RegistryConverter):
    """Confluent's `io.confluent.connect.json.JsonSchemaConverter`: the Confluent wire format (magic
    byte 0, the 4-byte schema id the registry gave the record's schema, then the JSON text,
    described by a JSON Schema); schemas are registered in and read from a Schema Registry
    (`schema.registry.url`).

    Settings as Confluent's converter (see `settings`).
    """

    FORMAT = "JSON"

    def _start_caches(self, size: int) -> None:
        self._to_json: LruCache = LruCache(
            size
        )  # Connect schema -> (schema text, title, has decimals, value converter)
        self._readers: LruCache = LruCache(size)  # schema id -> Connect schema

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.default_value is None):
            return None
        schema = self._schema_of(topic, schema, value)
        found = self._to_json.get(schema)
        if found is None:
            js = to_json_schema(schema)
            text = json.dumps(js, separators=(",", ":"))
            found = self._to_json.put(
                schema, (text, js.get("title"), has_decimal(schema), json_value_converter(schema))
            )
        text, title, decimals, convert = found
        subject = self.registry.subject(topic, title)
        registered = self.registry.schema_for_write(subject, RegistrySchema(text, self.FORMAT), schema)
        return frame(registered.schema_id, dump_json(convert(value), decimals).encode())

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        schema_id, payload = unframe(bytes(data), topic, self._what())
        connect_schema = self._readers.get(schema_id)
        if connect_schema is None:
            registered = self.registry.schema_by_id(schema_id, topic)
            self._check_format(registered.schema_type, schema_id, topic)
            connect_schema = self._readers.put(
                schema_id, from_json_schema(json.loads(schema_text(registered)))
            )
        try:
            parsed = json.loads(bytes(payload), parse_float=decimal.Decimal)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataException(
                f"JsonSchemaConverter could not parse the record {self._what()} from topic {topic!r}: {exc}"
            ) from None
        return SchemaAndValue(connect_schema, from_json_value(connect_schema, parsed))
