"""`ProtobufConverter`: Confluent's `io.confluent.connect.protobuf.ProtobufConverter`, in Python.

The wire format (magic byte, schema id, message indexes) in front of the Protobuf binary of the
record; the schema is the proto3 file `protobuf_data` makes of the Connect schema, registered as type
`PROTOBUF`. See `protobuf_data` for the mapping and what it does not cover yet.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.schema_registry import Schema as RegistrySchema
from google.protobuf import message_factory
from google.protobuf.message import DecodeError

from eosconnect.api.data import Schema, SchemaAndValue
from eosconnect.api.errors import DataException
from eosconnect.converters.schema_registry.base import LruCache, RegistryConverter
from eosconnect.converters.schema_registry.protobuf_data import (
    ProtoFile,
    connect_schema,
    from_message,
    message_descriptor,
    to_message,
    to_proto,
)
from eosconnect.converters.schema_registry.protobuf_text import parse_proto
from eosconnect.converters.schema_registry.settings import schema_text
from eosconnect.converters.schema_registry.wire import (
    frame,
    read_message_indexes,
    unframe,
    write_message_indexes,
)

__all__ = ["ProtobufConverter"]

#: The generated file has one top-level message: index [0], written as the single byte 0.
_FIRST_MESSAGE = write_message_indexes([0])


class ProtobufConverter(RegistryConverter):
    """Confluent's `io.confluent.connect.protobuf.ProtobufConverter`: the Confluent wire format
    (magic byte 0, the 4-byte schema id the registry gave the record's schema, then Confluent's
    message indexes and the Protobuf binary); schemas are registered in and read from a Schema
    Registry (`schema.registry.url`).

    Settings as Confluent's converter (see `settings`).
    """

    FORMAT = "PROTOBUF"

    def _start_caches(self, size: int) -> None:
        self._files = LruCache(size)  # Connect schema -> ProtoFile
        self._readers = LruCache(size)  # (schema id, indexes) -> (message class, Connect schema)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.default_value is None):
            return None
        schema = self._schema_of(topic, schema, value)
        proto: ProtoFile | None = self._files.get(schema)
        if proto is None:
            proto = self._files.put(schema, to_proto(schema))
        subject = self.registry.subject(topic, proto.full_name)
        registered = self.registry.schema_for_write(subject, RegistrySchema(proto.text, self.FORMAT), schema)
        message = to_message(schema, value, proto.message_class())
        return frame(registered.schema_id, message.SerializeToString(), _FIRST_MESSAGE)

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        schema_id, rest = unframe(bytes(data), topic, self._what())
        indexes, payload = read_message_indexes(rest)
        key = (schema_id, tuple(indexes))
        reader = self._readers.get(key)
        if reader is None:
            registered = self.registry.schema_by_id(schema_id, topic)
            self._check_format(registered.schema_type, schema_id, topic)
            descriptor = message_descriptor(parse_proto(schema_text(registered)), indexes)
            reader = self._readers.put(
                key, (message_factory.GetMessageClass(descriptor), connect_schema(descriptor))
            )
        message_class, schema = reader
        message = message_class()
        try:
            message.ParseFromString(bytes(payload))
        except DecodeError as exc:
            raise DataException(
                f"ProtobufConverter could not decode the record {self._what()} from topic {topic!r} "
                f"(schema id {schema_id}): {exc}"
            ) from None
        return SchemaAndValue(schema, from_message(schema, message))
