"""`AvroConverter`: Confluent's `io.confluent.connect.avro.AvroConverter`, in Python.

A record is written as the Confluent wire format (magic byte, the schema id the registry gave its
Avro schema, Avro binary) and read back from it, the schema found by id in the registry. The
Connect <-> Avro mapping is `avro_data`'s (Confluent's AvroData), so Java's AvroConverter and
Confluent's Avro deserializers read what this writes, and the other way round.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
from confluent_kafka.schema_registry import Schema as RegistrySchema

from eosconnect.api.data import Schema, SchemaAndValue
from eosconnect.api.errors import DataException
from eosconnect.api.schema_registry.avro_data import (
    from_avro_schema,
    from_avro_value,
    to_avro_schema,
    to_avro_value,
)
from eosconnect.api.schema_registry.base import LruCache, RegistryConverter
from eosconnect.api.schema_registry.wire import frame, unframe

__all__ = ["AvroConverter"]


class AvroConverter(RegistryConverter):
    """Confluent's `io.confluent.connect.avro.AvroConverter`: the Confluent wire format (magic byte
    0, the 4-byte schema id the registry gave the record's schema, then Avro binary); schemas are
    registered in and read from a Schema Registry (`schema.registry.url`).

    Settings as Confluent's converter (see `settings`).
    """

    FORMAT = "AVRO"

    def _start_caches(self, size: int) -> None:
        self._to_avro = LruCache(size)  # Connect schema -> (schema text, record name)
        self._writers = LruCache(size)  # schema id -> parsed Avro writer schema
        self._readers = LruCache(size)  # schema id -> (parsed Avro, Connect schema)

    # ------------------------------------------------------------------------------------- writing
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.default_value is None):
            return None
        schema = self._schema_of(topic, schema, value)
        found = self._to_avro.get(schema)
        if found is None:
            avro = to_avro_schema(schema)
            text = json.dumps(avro, separators=(",", ":"))
            record_name = _record_name(avro)
            found = self._to_avro.put(schema, (text, record_name))
        text, record_name = found
        subject = self.registry.subject(topic, record_name)
        registered = self.registry.schema_for_write(subject, RegistrySchema(text, self.FORMAT))
        writer = self._writers.get(registered.schema_id)
        if writer is None:
            writer = self._writers.put(
                registered.schema_id, fastavro.parse_schema(json.loads(registered.schema.schema_str))
            )
        datum = to_avro_value(schema, value)
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, writer, datum)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise DataException(
                f"AvroConverter could not write the record {self._what()} for topic {topic!r} with the "
                f"schema registered as id {registered.schema_id} under subject {subject!r}: {exc}"
            ) from None
        return frame(registered.schema_id, out.getvalue())

    # ------------------------------------------------------------------------------------- reading
    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        schema_id, payload = unframe(bytes(data), topic, self._what())
        reader = self._readers.get(schema_id)
        if reader is None:
            registered = self.registry.schema_by_id(schema_id, topic)
            self._check_format(registered.schema_type, schema_id, topic)
            avro = json.loads(registered.schema_str)
            reader = self._readers.put(schema_id, (fastavro.parse_schema(avro), from_avro_schema(avro)))
        parsed, connect_schema = reader
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)
        except (EOFError, ValueError, TypeError, IndexError) as exc:
            raise DataException(
                f"AvroConverter could not read the record {self._what()} from topic {topic!r} with schema "
                f"id {schema_id}: {exc}"
            ) from None
        return SchemaAndValue(connect_schema, from_avro_value(connect_schema, datum))


def _record_name(avro: Any) -> str | None:
    """The full name RecordNameStrategy uses: a record's (or enum's, fixed's) name, else the type."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        return _record_name(branches[0]) if len(branches) == 1 else None
    if isinstance(avro, str):
        return avro
    if avro.get("type") in ("record", "enum", "fixed"):
        namespace = avro.get("namespace")
        return f"{namespace}.{avro['name']}" if namespace else avro["name"]
    return _record_name(avro["type"])
