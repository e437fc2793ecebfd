"""What the three Schema Registry converters share: settings, registry access, schema inference."""

from __future__ import annotations

from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigDef
from eosconnect.api.converter import Converter
from eosconnect.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT64_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaAndValue,
    Struct,
)
from eosconnect.api.errors import DataException
from eosconnect.converters.schema_registry.settings import (
    RegistryAccess,
    registry_config_def,
    registry_settings,
)

__all__ = ["LruCache", "RegistryConverter"]


class LruCache(OrderedDict[Any, Any]):
    """At most `size` entries; the least recently added goes first (schemas per converter)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = max(size, 1)

    def put(self, key: Any, value: Any) -> Any:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)
        return value


class RegistryConverter(Converter):
    """A converter whose records carry a registry schema id (the Confluent wire format).

    Subclasses implement `from_connect_data`/`to_connect_data` (Kafka's `fromConnectData` and
    `toConnectData`); `from_connect`/`to_connect` take the schema from a `Struct` value or infer it for
    a primitive, as Kafka's `Values.inferSchema` does.
    """

    registry: RegistryAccess
    #: The registry's schema type of this converter's schemas: AVRO, JSON or PROTOBUF.
    FORMAT = ""

    def config_def(self) -> ConfigDef:
        return registry_config_def()

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:
        self.is_key = is_key
        self.config = registry_settings(self.config_def(), config, self._prefix())
        self.registry = RegistryAccess(self.config, is_key, self._prefix())
        self._start_caches(self.config["schemas.cache.size"])

    def preflight(self) -> dict[str, list[str]]:
        """Validation asks the registry once: an unreachable URL is refused with the connector's
        config instead of failing its task at the first record."""
        return self.registry.reachability_errors()

    @abstractmethod
    def _start_caches(self, size: int) -> None:
        """Set up the converter's schema caches (`LruCache`s of `size`)."""

    def _check_format(self, schema_type: str | None, schema_id: int, topic: str) -> None:
        """Refuse a record whose registered schema is of another format (Avro read as JSON ...)."""
        if (schema_type or "AVRO") != self.FORMAT:
            raise DataException(
                f"The record {self._what()} from topic {topic!r} was written with a {schema_type or 'AVRO'} "
                f"schema (id {schema_id}), not {self.FORMAT}: use the converter it was written with."
            )

    @abstractmethod
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """Serialise `value` of `schema` for `topic` (None stays None: a null key or a tombstone)."""

    @abstractmethod
    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        """The schema and value of a record read from `topic`."""

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        return self.from_connect_data(topic, None, value)

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        return self.to_connect_data(topic, data).value

    def _schema_of(self, topic: str, schema: Schema | None, value: Any) -> Schema:
        if schema is not None:
            return schema
        if isinstance(value, Struct):
            return value.schema
        inferred = _INFERRED.get(type(value))
        if inferred is None:
            raise DataException(
                f"{type(self).__name__} needs a schema for the record {self._what()} for topic {topic!r}: "
                f"a {type(value).__name__} has none. Emit a Struct (or set the record's "
                f"{self._what()}_schema), or use a schemaless converter such as JsonConverter."
            )
        return inferred


_INFERRED: dict[type, Schema] = {
    str: STRING_SCHEMA,
    bool: BOOLEAN_SCHEMA,
    int: INT64_SCHEMA,
    float: FLOAT64_SCHEMA,
    bytes: BYTES_SCHEMA,
}
