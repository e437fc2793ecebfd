"""Records written by a converter other than JSON, read by `eosconnect verify` as JSON.

The checks in `eosconnect.tools.verify` read keys and values as JSON text (plain or in a JsonConverter
`schemas.enable=true` envelope). A topic filled through another converter, e.g. Confluent's wire
format from the AvroConverter, is checked by decoding each key/value with that converter (the one the
connector used, with the same settings: `schema.registry.url`, ...) and writing the Connect data back
as schemaless JSON, Decimals as numbers; the checks then read it as they read any JSON topic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from eosconnect.api.converter import Converter
from eosconnect.api.errors import DataException
from eosconnect.converters.json import JsonConverter
from eosconnect.converters.resolution import converter_from_config
from eosconnect.storage.topic_reader import TopicRecord

__all__ = ["RecordDecoder", "record_decoder"]


def _plain_json() -> JsonConverter:
    converter = JsonConverter()
    converter.configure({"schemas.enable": "false", "decimal.format": "NUMERIC"}, False)
    return converter


@dataclass
class RecordDecoder:
    """Turns a record's key and value (each through its converter, where one is given) into JSON text.

    A key or value its converter cannot read becomes None, so the checks count the record as one
    without an id (an anomaly) rather than stopping the whole check."""

    key: Converter | None
    value: Converter | None
    json: JsonConverter = dataclasses.field(default_factory=_plain_json)

    def __call__(self, record: TopicRecord) -> TopicRecord:
        return dataclasses.replace(
            record,
            key=self._as_json(self.key, record.topic, record.key),
            value=self._as_json(self.value, record.topic, record.value),
        )

    def _as_json(self, converter: Converter | None, topic: str, data: bytes | None) -> bytes | None:
        if converter is None or data is None:
            return data
        try:
            schema, value = converter.to_connect_data(topic, data)
            return self.json.from_connect_data(topic, schema, value)
        except DataException:
            return None


def record_decoder(
    key_converter: str | None, value_converter: str | None, settings: Mapping[str, str]
) -> RecordDecoder | None:
    """The decoder for `key_converter`/`value_converter` (names as in `key.converter`, e.g. `avro` or
    `io.confluent.connect.avro.AvroConverter`), each configured with `settings`; None when neither is
    given. Raises `ConfigException` naming the setting for an unknown converter or a bad setting."""
    if key_converter is None and value_converter is None:
        return None
    config: dict[str, str] = {}
    for side, name in (("key", key_converter), ("value", value_converter)):
        if name is not None:
            config[f"{side}.converter"] = name
            config.update({f"{side}.converter.{k}": v for k, v in settings.items()})
    return RecordDecoder(
        key=converter_from_config(config, is_key=True) if key_converter is not None else None,
        value=converter_from_config(config, is_key=False) if value_converter is not None else None,
    )
