"""The `Converter` interface: record keys and values (with their schemas) <-> the bytes stored in Kafka.

A converter writes a value with its schema (`from_connect_data(topic, schema, value)`) and reads
bytes back into a `SchemaAndValue` (`to_connect_data`), as Kafka's `Converter` interface does.
`from_connect`/`to_connect` are the schemaless forms that older converters implement; the base
class maps one pair onto the other, so a converter written for either keeps working. The built-in
converters are in `eosconnect.converters`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from eosconnect.api.config import ConfigDef
from eosconnect.api.data.schema import Schema, SchemaAndValue

__all__ = ["Converter"]


class Converter(ABC):
    """Turns record keys or values into bytes for Kafka and back.

    One instance serves either keys or values (`is_key`), as in Kafka Connect, because the two
    are configured separately (`key.converter.*` vs `value.converter.*`).
    """

    def __init__(self) -> None:
        self.is_key = False
        self.config: dict[str, Any] = self.config_def().parse({})

    def config_def(self) -> ConfigDef:
        """The converter's own settings (without the `value.converter.` prefix)."""
        return ConfigDef()

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:
        """Apply settings (prefix already stripped). The default validates them against
        `config_def()`; override and call `super().configure` to keep that."""
        self.is_key = is_key
        self.config = self.config_def().parse(config, prefix=self._prefix())

    def preflight(self) -> dict[str, list[str]]:
        """Checks of a configured converter that need the world outside the config (a registry
        that answers), run by connector validation: problems by setting name, {} if none."""
        return {}

    @abstractmethod
    def from_connect(self, topic: str, value: Any) -> bytes | None:
        """Serialise a key/value for `topic`; None stays None (a null key or a tombstone)."""

    @abstractmethod
    def to_connect(self, topic: str, data: bytes | None) -> Any:
        """Deserialise bytes read from `topic`."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """Serialise a key/value and its schema (None: schemaless), Kafka's `fromConnectData`.
        The default ignores the schema and calls `from_connect`: override it to write schemas."""
        return self.from_connect(topic, value)

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        """Deserialise bytes into a value and its schema, Kafka's `toConnectData`. The default calls
        `to_connect` and reports no schema."""
        return SchemaAndValue(None, self.to_connect(topic, data))

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        """`from_connect_data` for a whole column of a `SourceBatch` (one schema for all), in order.
        Override where a column converts much faster than value by value (the built-ins do)."""
        if schema is None:
            return [self.from_connect(topic, value) for value in values]
        return [self.from_connect_data(topic, schema, value) for value in values]

    def _prefix(self) -> str:
        return "key.converter." if self.is_key else "value.converter."

    def _what(self) -> str:
        return "key" if self.is_key else "value"
