"""Converters by name: `key.converter`/`value.converter` settings (Kafka class names, short names
or Python paths) to a configured instance (`converter_from_config`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.api.converter import Converter
from eosconnect.api.errors import ConfigException
from eosconnect.converters.json import JsonConverter
from eosconnect.converters.primitives import (
    BooleanConverter,
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
    StringConverter,
)
from eosconnect.plugins.loading import import_class
from eosconnect.plugins.versions import VERSION_SUFFIX, select_version

__all__ = [
    "CONVERTER_ALIASES",
    "CONVERTER_PATHS",
    "converter_from_config",
    "resolve_converter_class",
]


CONVERTER_ALIASES: dict[str, type[Converter]] = {
    "json": JsonConverter,
    "JsonConverter": JsonConverter,
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
    "string": StringConverter,
    "StringConverter": StringConverter,
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "bytes": ByteArrayConverter,
    "bytearray": ByteArrayConverter,
    "ByteArrayConverter": ByteArrayConverter,
    "org.apache.kafka.connect.converters.ByteArrayConverter": ByteArrayConverter,
    **{
        alias: cls
        for cls in (
            BooleanConverter,
            DoubleConverter,
            FloatConverter,
            IntegerConverter,
            LongConverter,
            ShortConverter,
        )
        for alias in (cls.__name__, f"org.apache.kafka.connect.converters.{cls.__name__}")
    },
}
"""Names accepted for converters besides Python class paths (Kafka's Java names map to ours)."""

_REGISTRY_CONVERTERS = "eosconnect.converters.schema_registry."
CONVERTER_PATHS: dict[str, str] = {
    alias: _REGISTRY_CONVERTERS + path
    for path, aliases in {
        "avro.AvroConverter": ("avro", "AvroConverter", "io.confluent.connect.avro.AvroConverter"),
        "json_schema.JsonSchemaConverter": (
            "jsonschema",
            "JsonSchemaConverter",
            "io.confluent.connect.json.JsonSchemaConverter",
        ),
        "protobuf.ProtobufConverter": (
            "protobuf",
            "ProtobufConverter",
            "io.confluent.connect.protobuf.ProtobufConverter",
        ),
    }.items()
    for alias in aliases
}
"""Aliases of converters that live in their own modules (the Schema Registry converters and their
libraries are only imported when a connector uses them), by the Python path they stand for."""

_CONVERTER_CHOICES = (
    "json, string or bytes (or Kafka's org.apache.kafka.connect.json.JsonConverter, "
    "org.apache.kafka.connect.storage.StringConverter, "
    "org.apache.kafka.connect.converters.ByteArrayConverter, or its Integer/Long/Short/Float/Double/"
    "BooleanConverter), avro, jsonschema or protobuf (Confluent's io.confluent.connect.avro.AvroConverter, "
    "io.confluent.connect.json.JsonSchemaConverter, io.confluent.connect.protobuf.ProtobufConverter), "
    "or a Python class path such as mypackage.converters.MyConverter"
)


def resolve_converter_class(
    name: str | type[Converter], *, setting: str = "value.converter"
) -> type[Converter]:
    """The converter class for a name; raises `ConfigException` naming `setting` if unknown."""
    if isinstance(name, type):
        cls: type = name
    else:
        value = name.strip()
        if value in CONVERTER_ALIASES:
            return CONVERTER_ALIASES[value]
        value = CONVERTER_PATHS.get(value, value)
        try:
            cls = import_class(value)
        except ImportError as exc:
            raise ConfigException(
                errors={
                    setting: [
                        f"cannot load converter {value!r}: {exc}. Set {setting} to {_CONVERTER_CHOICES}."
                    ]
                }
            ) from exc
    if not issubclass(cls, Converter):
        raise ConfigException(
            errors={
                setting: [
                    f"{cls.__module__}.{cls.__qualname__} is not a converter: it must subclass "
                    f"eosconnect.api.Converter. Set {setting} to {_CONVERTER_CHOICES}."
                ]
            }
        )
    return cls


def converter_from_config(
    config: Mapping[str, Any], *, is_key: bool, default: str | None = "json"
) -> Converter:
    """A configured key or value converter from `key.converter`/`value.converter` and its
    `key.converter.*`/`value.converter.*` sub-settings.

    Pass the effective config (worker settings overlaid with the connector's). `default` is used
    when the setting is absent; None makes the setting required.
    """
    setting = "key.converter" if is_key else "value.converter"
    name = config.get(setting) or default
    if not name:
        raise ConfigException(errors={setting: [f"is required. Set {setting} to {_CONVERTER_CHOICES}."]})
    cls = resolve_converter_class(name, setting=setting)
    version_setting = setting + VERSION_SUFFIX  # KIP-891 (plugins/versions.py)
    cls = select_version(cls, config.get(version_setting), version_setting, str(name))
    prefix = setting + "."
    sub_config = {
        k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix) and k != version_setting
    }
    converter = cls()
    converter.configure(sub_config, is_key)
    return converter
