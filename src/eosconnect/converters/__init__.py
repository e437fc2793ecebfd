"""The built-in converters, Kafka's `connect-json` and `connect-runtime` converters and Confluent's
Schema Registry ones, on the `eosconnect.api.Converter` interface.

`json` (`JsonConverter`) and `json_format`/`json_text` (the JSON that Kafka's converter writes),
`primitives` (string, bytes, numbers, booleans), `resolution` (the `key.converter` /
`value.converter` names and `converter_from_config`) and `schema_registry` (Avro, JSON Schema and
Protobuf in the Confluent wire format, imported only when a connector names them).
"""

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
from eosconnect.converters.resolution import CONVERTER_ALIASES, converter_from_config, resolve_converter_class

__all__ = [
    "CONVERTER_ALIASES",
    "BooleanConverter",
    "ByteArrayConverter",
    "DoubleConverter",
    "FloatConverter",
    "IntegerConverter",
    "JsonConverter",
    "LongConverter",
    "ShortConverter",
    "StringConverter",
    "converter_from_config",
    "resolve_converter_class",
]
