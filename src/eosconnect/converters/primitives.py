"""Kafka's converters of one primitive each: `StringConverter`, `ByteArrayConverter`, the number
converters (`ShortConverter` ... `DoubleConverter`) and `BooleanConverter`, byte for byte as Kafka
writes them (UTF-8 strings, raw bytes, big-endian numbers).
"""

from __future__ import annotations

import decimal
import math
import struct as _binary
from collections.abc import Sequence
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.converter import Converter
from eosconnect.api.data.schema import (
    OPTIONAL_BOOLEAN_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    Schema,
    SchemaAndValue,
    Type,
)
from eosconnect.api.errors import DataException
from eosconnect.converters.json_text import java_double_text, java_float_text

__all__ = [
    "BooleanConverter",
    "ByteArrayConverter",
    "DoubleConverter",
    "FloatConverter",
    "IntegerConverter",
    "LongConverter",
    "ShortConverter",
    "StringConverter",
    "as_bytes",
]


def as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(type(data).__name__)


class StringConverter(Converter):
    """Kafka's `org.apache.kafka.connect.storage.StringConverter`: text in `converter.encoding`
    (UTF-8 by default). Numbers, decimals and booleans are written as their text, like Java's
    `toString` (`1.0E7`); what it reads has the schema `OPTIONAL_STRING_SCHEMA`, as in Kafka."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "converter.encoding",
            ConfigType.STRING,
            "UTF-8",
            Importance.LOW,
            "The character encoding of the strings.",
            validator=_known_encoding,
        )

    @property
    def encoding(self) -> str:
        return str(self.config["converter.encoding"])

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        return self.from_connect_data(topic, None, value)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, str):
            text = str(value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float):
            single = schema is not None and schema.type is Type.FLOAT32
            text = _java_float_string(value, single)
        elif isinstance(value, int | decimal.Decimal):
            text = str(value)
        else:
            raise DataException(
                f"StringConverter cannot write a {type(value).__name__} record {self._what()} to topic "
                f"{topic!r}; it writes strings (and numbers/booleans as text). Use JsonConverter for "
                "dicts and lists or ByteArrayConverter for bytes."
            )
        try:
            return text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise DataException(
                f"StringConverter cannot encode a record for topic {topic!r}: {exc}"
            ) from None

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        # Strings are the common case: encode the column in one comprehension and fall back to the
        # value-by-value path (numbers, None, the error messages) when anything else is in it.
        encoding = self.encoding
        try:
            return [value.encode(encoding) for value in values]
        except (AttributeError, UnicodeEncodeError):
            return [self.from_connect_data(topic, schema, value) for value in values]

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_STRING_SCHEMA, self.to_connect(topic, data))

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return as_bytes(data).decode(self.encoding)
        except TypeError as exc:
            raise DataException(f"StringConverter expects bytes from topic {topic!r}, got {exc}") from None
        except UnicodeDecodeError as exc:
            raise DataException(
                f"StringConverter could not decode the record {self._what()} from topic {topic!r} as "
                f"{self.encoding}: {exc}. For binary data use ByteArrayConverter."
            ) from None


def _java_float_string(value: float, single: bool) -> str:
    """`Double.toString`/`Float.toString` of a value (`1.0E7`, `NaN`, `Infinity`)."""
    if not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return java_float_text(value) if single else java_double_text(value)


def _known_encoding(name: str, value: Any) -> None:
    try:
        "".encode(value)
    except LookupError:
        raise ValueError(f"unknown encoding {value!r}. Set {name} to an encoding such as UTF-8.") from None


class ByteArrayConverter(Converter):
    """Kafka's `org.apache.kafka.connect.converters.ByteArrayConverter`: bytes pass through as-is;
    a schema, if given, must be BYTES, and what it reads has the schema `OPTIONAL_BYTES_SCHEMA`."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise DataException(
                f"Invalid schema type for ByteArrayConverter: {schema.type} (record {self._what()} for topic "
                f"{topic!r}). It writes BYTES values; use JsonConverter or a converter for {schema.type}."
            )
        return self.from_connect(topic, value)

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, self.to_connect(topic, data))

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        try:
            return as_bytes(value)
        except TypeError:
            raise DataException(
                f"ByteArrayConverter needs bytes, but the record {self._what()} for topic {topic!r} is a "
                f"{type(value).__name__}. Produce bytes in the connector or use JsonConverter or "
                "StringConverter."
            ) from None

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        # The identity for a column of bytes (what the mirrors copy): no new list, no call per value.
        if schema is not None:
            self.from_connect_data(topic, schema, None)  # checks the schema's type once
        for value in values:
            if value.__class__ is not bytes and value is not None:
                return super().from_connect_batch(topic, values)
        return values

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return as_bytes(data)
        except TypeError as exc:
            raise DataException(f"ByteArrayConverter expects bytes from topic {topic!r}, got {exc}") from None


class _NumberConverter(Converter):
    """Kafka's `NumberConverter`s: one number as its big-endian bytes, as Kafka's serializers write it."""

    type_name: str
    schema: Schema
    _format: str
    _range: tuple[int, int] | None = None

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DataException(
                f"Failed to serialize to {self.type_name} (was {type(value).__name__}): the record "
                f"{self._what()} for topic {topic!r} must be a number"
            )
        if self._range is not None:
            low, high = self._range
            if not isinstance(value, int) or not low <= value <= high:
                raise DataException(
                    f"Failed to serialize to {self.type_name}: {value!r} (record {self._what()} for topic "
                    f"{topic!r}) is not an integer in {low}..{high}"
                )
        return _binary.pack(self._format, value)

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        raw = as_bytes(data)
        size = _binary.calcsize(self._format)
        if len(raw) != size:
            raise DataException(
                f"Failed to deserialize {self.type_name}: Size of data received by "
                f"{self.type_name.capitalize()}Deserializer is not {size} (record {self._what()} from topic "
                f"{topic!r} has {len(raw)} bytes)"
            )
        return _binary.unpack(self._format, raw)[0]

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(self.schema, self.to_connect(topic, data))


class ShortConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.ShortConverter`: INT16 as 2 big-endian bytes."""

    type_name, schema, _format, _range = "short", OPTIONAL_INT16_SCHEMA, ">h", (-(2**15), 2**15 - 1)


class IntegerConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.IntegerConverter`: INT32 as 4 big-endian bytes."""

    type_name, schema, _format, _range = "integer", OPTIONAL_INT32_SCHEMA, ">i", (-(2**31), 2**31 - 1)


class LongConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.LongConverter`: INT64 as 8 big-endian bytes."""

    type_name, schema, _format, _range = "long", OPTIONAL_INT64_SCHEMA, ">q", (-(2**63), 2**63 - 1)


_FLOAT32_MAX = 3.4028234663852886e38


class FloatConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.FloatConverter`: FLOAT32 as 4 IEEE 754 bytes."""

    type_name, schema, _format = "float", OPTIONAL_FLOAT32_SCHEMA, ">f"

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if isinstance(value, float) and math.isfinite(value) and abs(value) > _FLOAT32_MAX:
            value = math.copysign(math.inf, value)  # what Java's narrowing gives; struct.pack refuses it
        return super().from_connect(topic, value)


class DoubleConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.DoubleConverter`: FLOAT64 as 8 IEEE 754 bytes."""

    type_name, schema, _format = "double", OPTIONAL_FLOAT64_SCHEMA, ">d"


class BooleanConverter(Converter):
    """Kafka's `org.apache.kafka.connect.converters.BooleanConverter`: one byte, 1 for true, 0 for false."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not Type.BOOLEAN:
            raise DataException(f"Invalid schema type for BooleanConverter: {schema.type}")
        return self.from_connect(topic, value)

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if value is True:
            return b"\x01"
        if value is False:
            return b"\x00"
        raise DataException(
            f"BooleanConverter is not compatible with objects of type {type(value).__name__} (record "
            f"{self._what()} for topic {topic!r})"
        )

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        raw = as_bytes(data)
        if len(raw) != 1:
            raise DataException(
                "Failed to deserialize boolean: Size of data received by BooleanDeserializer is not 1"
            )
        if raw[0] > 1:
            raise DataException(
                f"Failed to deserialize boolean: Unexpected byte received by BooleanDeserializer: {raw[0]}"
            )
        return raw[0] == 1

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BOOLEAN_SCHEMA, self.to_connect(topic, data))
