"""`AvroConverter`: Confluent's `io.confluent.connect.avro.AvroConverter`, in Python.

A record is written as the Confluent wire format (magic byte, the schema id the registry gave its
Avro schema, Avro binary) and read back from it, the schema found by id in the registry. The
Connect <-> Avro mapping is `avro_data`'s (Confluent's AvroData), so Java's AvroConverter and
Confluent's Avro deserializers read what this writes, and the other way round.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

import fastavro
from confluent_kafka.schema_registry import Schema as RegistrySchema

from eosconnect.api.data import Schema, SchemaAndValue
from eosconnect.api.errors import DataException
from eosconnect.converters.schema_registry.avro_data import (
    avro_value_converter,
    from_avro_schema,
    from_avro_value,
    to_avro_schema,
)
from eosconnect.converters.schema_registry.base import LruCache, RegistryConverter
from eosconnect.converters.schema_registry.settings import schema_text
from eosconnect.converters.schema_registry.wire import frame, unframe

__all__ = ["AvroConverter"]


class AvroConverter(RegistryConverter):
    """Confluent's `io.confluent.connect.avro.AvroConverter`: the Confluent wire format (magic byte
    0, the 4-byte schema id the registry gave the record's schema, then Avro binary); schemas are
    registered in and read from a Schema Registry (`schema.registry.url`).

    Settings as Confluent's converter (see `settings`).
    """

    FORMAT = "AVRO"

    def _start_caches(self, size: int) -> None:
        self._to_avro = LruCache(size)  # Connect schema -> (schema text, record name, value converter)
        self._writers = LruCache(size)  # schema id -> parsed Avro writer schema
        self._readers = LruCache(size)  # schema id -> (parsed Avro, Connect schema)

    # ------------------------------------------------------------------------------------- writing
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.default_value is None):
            return None
        schema = self._schema_of(topic, schema, value)
        return self._write(topic, schema, [value])[0]

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        """A column of one schema: the registry is asked once, and the records written with one
        compiled value converter and one parsed Avro schema."""
        if schema is None:
            return [self.from_connect_data(topic, None, value) for value in values]
        try:
            return self._write(topic, schema, values)
        except DataException:
            return [self.from_connect_data(topic, schema, value) for value in values]  # names the value

    def _write(self, topic: str, schema: Schema, values: Sequence[Any]) -> list[bytes | None]:
        """`values` of `schema` framed with the id registered for it (nulls stay null unless the
        schema has a default)."""
        found = self._to_avro.get(schema)
        if found is None:
            avro = to_avro_schema(schema)
            text = json.dumps(avro, separators=(",", ":"))
            found = self._to_avro.put(schema, (text, _record_name(avro), avro_value_converter(schema)))
        text, record_name, convert = found
        subject = self.registry.subject(topic, record_name)
        registered = self.registry.schema_for_write(subject, RegistrySchema(text, self.FORMAT), schema)
        writer = self._writers.get(registered.schema_id)
        if writer is None:
            writer = self._writers.put(
                registered.schema_id, fastavro.parse_schema(json.loads(schema_text(registered.schema)))
            )
        header = frame(registered.schema_id, b"")
        keep_null = schema.default_value is None
        out: list[bytes | None] = []
        buffer = io.BytesIO()
        write, seek, truncate, getvalue = (
            fastavro.schemaless_writer,
            buffer.seek,
            buffer.truncate,
            buffer.getvalue,
        )
        try:
            for value in values:
                if value is None and keep_null:
                    out.append(None)
                    continue
                seek(0)
                truncate()
                write(buffer, writer, convert(value))
                out.append(header + getvalue())
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise DataException(
                f"AvroConverter could not write the record {self._what()} for topic {topic!r} with the "
                f"schema registered as id {registered.schema_id} under subject {subject!r}: {exc}"
            ) from None
        return out

    # ------------------------------------------------------------------------------------- reading
    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        schema_id, payload = unframe(bytes(data), topic, self._what())
        reader = self._readers.get(schema_id)
        if reader is None:
            registered = self.registry.schema_by_id(schema_id, topic)
            self._check_format(registered.schema_type, schema_id, topic)
            avro = json.loads(schema_text(registered))
            reader = self._readers.put(schema_id, (fastavro.parse_schema(avro), from_avro_schema(avro)))
        parsed, connect_schema = reader
        try:
            # A record taken by a union comes as (record name, fields): the union STRUCT's branch.
            datum = fastavro.schemaless_reader(
                io.BytesIO(payload), parsed, None, return_record_name=True, return_record_name_override=True
            )
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
