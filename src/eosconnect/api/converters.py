"""Converters: record keys and values <-> the bytes stored in Kafka.

The built-ins write exactly what Kafka Connect's converters write (JSON with
`schemas.enable=false`, UTF-8 strings, raw bytes), so topics filled by eosconnect read the same in
kcat, console consumers and Java Connect sinks. `converter_from_config` maps the usual
`key.converter`/`value.converter` settings (Kafka class names, short names or Python paths) to a
configured instance.
"""

from __future__ import annotations

import base64
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.plugins import import_class

__all__ = [
    "CONVERTER_ALIASES",
    "ByteArrayConverter",
    "Converter",
    "JsonConverter",
    "StringConverter",
    "converter_from_config",
    "resolve_converter_class",
]


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

    @abstractmethod
    def from_connect(self, topic: str, value: Any) -> bytes | None:
        """Serialise a key/value for `topic`; None stays None (a null key or a tombstone)."""

    @abstractmethod
    def to_connect(self, topic: str, data: bytes | None) -> Any:
        """Deserialise bytes read from `topic`."""

    def from_connect_batch(self, topic: str, values: Sequence[Any]) -> Sequence[bytes | None]:
        """`from_connect` for a whole column of a `SourceBatch`, in order. Override where a column can
        be converted much faster than value by value (the built-in converters do)."""
        return [self.from_connect(topic, value) for value in values]

    def _prefix(self) -> str:
        return "key.converter." if self.is_key else "value.converter."

    def _what(self) -> str:
        return "key" if self.is_key else "value"


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(type(data).__name__)


class JsonConverter(Converter):
    """Kafka's `org.apache.kafka.connect.json.JsonConverter` with `schemas.enable=false`.

    Compact JSON, non-ASCII written as UTF-8 (as Jackson does), bytes as base64 strings, and maps
    with non-string keys as arrays of `[key, value]` pairs, all as Kafka's converter writes them.
    Schema envelopes (`schemas.enable=true`) are not supported: eosconnect is schemaless.
    """

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "schemas.enable",
            ConfigType.BOOLEAN,
            False,
            Importance.HIGH,
            "Must be false: eosconnect writes and reads schemaless JSON only.",
            validator=_schemas_disabled,
        )

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if _is_flat_json(value):
            # The common case (a flat dict of JSON primitives or a primitive) needs no preparation walk.
            try:
                return _COMPACT_JSON(value).encode()
            except ValueError:
                pass  # NaN or infinity: the full path below reports it properly
        try:
            plain = _to_json_ready(value, "")
            return _COMPACT_JSON(plain).encode()
        except _NotJsonable as exc:
            raise DataException(
                f"JsonConverter cannot serialise the record {self._what()} for topic {topic!r}: {exc}. "
                "Convert it to JSON types (dict, list, str, int, float, bool, None, bytes) first."
            ) from None

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            raw = _as_bytes(data)
        except TypeError as exc:
            raise DataException(
                f"JsonConverter expects bytes from topic {topic!r}, got {exc} for the record {self._what()}"
            ) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataException(
                f"JsonConverter could not parse the record {self._what()} from topic {topic!r} as JSON: "
                f"{exc}. If the topic holds plain strings or binary data, use StringConverter or "
                f"ByteArrayConverter for {self._prefix().rstrip('.')}."
            ) from None


_JSON_SCALARS = (str, int, float, bool, type(None))
#: What `json.dumps(..., separators=(",", ":"), ensure_ascii=False, allow_nan=False)` does, without
#: building a new encoder per call (json.dumps only caches its default-settings encoder).
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _is_flat_json(value: Any) -> bool:
    """A JSON scalar, or a dict with string keys and scalar values (checked by exact type)."""
    if type(value) in _JSON_SCALARS:
        return True
    if type(value) is not dict:
        return False
    return all(type(k) is str and type(v) in _JSON_SCALARS for k, v in value.items())


def _schemas_disabled(name: str, value: Any) -> None:
    if value:
        raise ValueError(
            f"{name}=true is not supported: eosconnect's JsonConverter only reads and writes schemaless JSON "
            f"(no schema/payload envelope). Set {name}=false."
        )


class _NotJsonable(Exception):
    pass


def _to_json_ready(value: Any, path: str) -> Any:
    """Mirror Kafka's schemaless JsonConverter: validate types and reshape what JSON can't hold."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJsonable(f"{value!r} at {path or 'the top level'} is not a finite number")
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _to_json_ready(v, f"{path}.{k}" if path else k) for k, v in value.items()}
        return [
            [_to_json_ready(k, f"{path}[key]"), _to_json_ready(v, f"{path}[{k!r}]")] for k, v in value.items()
        ]
    if isinstance(value, list | tuple):
        return [_to_json_ready(item, f"{path}[{i}]") for i, item in enumerate(value)]
    where = f"at {path}" if path else "at the top level"
    raise _NotJsonable(f"the value of type {type(value).__name__} {where} has no JSON form")


class StringConverter(Converter):
    """Kafka's `org.apache.kafka.connect.storage.StringConverter`: text in `converter.encoding`
    (UTF-8 by default). Numbers and booleans are written as their text, like Java's `toString`."""

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
        if value is None:
            return None
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str | int | float):
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

    def from_connect_batch(self, topic: str, values: Sequence[Any]) -> Sequence[bytes | None]:
        # Strings are the common case: encode the column in one comprehension and fall back to the
        # value-by-value path (numbers, None, the error messages) when anything else is in it.
        encoding = self.encoding
        try:
            return [value.encode(encoding) for value in values]
        except (AttributeError, UnicodeEncodeError):
            return super().from_connect_batch(topic, values)

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return _as_bytes(data).decode(self.encoding)
        except TypeError as exc:
            raise DataException(f"StringConverter expects bytes from topic {topic!r}, got {exc}") from None
        except UnicodeDecodeError as exc:
            raise DataException(
                f"StringConverter could not decode the record {self._what()} from topic {topic!r} as "
                f"{self.encoding}: {exc}. For binary data use ByteArrayConverter."
            ) from None


def _known_encoding(name: str, value: Any) -> None:
    try:
        "".encode(value)
    except LookupError:
        raise ValueError(f"unknown encoding {value!r}. Set {name} to an encoding such as UTF-8.") from None


class ByteArrayConverter(Converter):
    """Kafka's `org.apache.kafka.connect.converters.ByteArrayConverter`: bytes pass through as-is."""

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        try:
            return _as_bytes(value)
        except TypeError:
            raise DataException(
                f"ByteArrayConverter needs bytes, but the record {self._what()} for topic {topic!r} is a "
                f"{type(value).__name__}. Produce bytes in the connector or use JsonConverter or "
                "StringConverter."
            ) from None

    def from_connect_batch(self, topic: str, values: Sequence[Any]) -> Sequence[bytes | None]:
        # The identity for a column of bytes (what the mirrors copy): no new list, no call per value.
        for value in values:
            if value.__class__ is not bytes and value is not None:
                return super().from_connect_batch(topic, values)
        return values

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return _as_bytes(data)
        except TypeError as exc:
            raise DataException(f"ByteArrayConverter expects bytes from topic {topic!r}, got {exc}") from None


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
}
"""Names accepted for converters besides Python class paths (Kafka's Java names map to ours)."""

_REGISTRY_CONVERTERS = "eosconnect.api.schema_registry."
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
    "org.apache.kafka.connect.converters.ByteArrayConverter), avro, jsonschema or protobuf (Confluent's "
    "io.confluent.connect.avro.AvroConverter, io.confluent.connect.json.JsonSchemaConverter, "
    "io.confluent.connect.protobuf.ProtobufConverter), "
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
    prefix = setting + "."
    sub_config = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    converter = cls()
    converter.configure(sub_config, is_key)
    return converter
